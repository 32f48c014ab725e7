"""The web app in a real browser: Playwright driving Debian's chromium headless (never a downloaded browser)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fakes.scripted_server import ScriptedServer
from tests.fakes.webapp import LiveApp, make_sweep, turn_script, wait_for

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)")


def test_submit_watch_pause_resume_and_open_a_sweep(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (pip install -e '.[dev]')")
    expect = sync_api.expect
    expect.set_options(timeout=30_000)  # a shared, busy machine: waits, not timing assertions
    shots = tmp_path / "screenshots"
    shots.mkdir()
    out = tmp_path / "out"
    with ScriptedServer([]) as srv:
        make_sweep(out, srv)
        srv.script[:] = turn_script(4, sleep=0.45)
        with LiveApp(out, srv.url) as app, sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))

            # home: the catalog's tiers with a master toggle each; a preset sets the checkboxes
            page.goto(app.url + "/")
            expect(page.locator("#tiers .tier")).to_have_count(3)
            page.click("#presets button:text-is('grep_only')")
            assert page.is_checked("#tool-grep") and not page.is_checked("#tool-bash")
            page.click("#presets button:text-is('none')")
            assert page.is_checked("#tool-bash") and not page.is_checked("#tool-search_dataroom")
            page.uncheck("#tier-builtin")
            assert not page.is_checked("#tool-read")
            page.check("#tier-builtin")
            page.fill("#question", "How tall is the Gannet Rock lighthouse?")
            page.fill("#budget", "4")
            page.screenshot(path=str(shots / "home.png"), full_page=True)
            page.click("#submit")
            page.wait_for_url("**/runs/web/jobs/**")

            # the dashboard updates while the run goes: token chart points and activity feed grow
            chart = page.locator("#tokens-chart")
            feed = page.locator("#feed .feed-item.call")
            wait_for(lambda: int(chart.get_attribute("data-turns")) >= 1 and feed.count() >= 2, what="first chart point and feed items")
            first_calls = feed.count()
            assert page.locator("#tokens-chart canvas").count() == 1
            page.screenshot(path=str(shots / "dashboard-live.png"), full_page=True)
            wait_for(lambda: int(chart.get_attribute("data-turns")) >= 2 and feed.count() > first_calls, what="a second turn")
            expect(page.locator("#feed .feed-item.call pre.args").first).to_contain_text("ANSWER.md")
            expect(page.locator("#tool-dist [data-tool='bash: grep']")).to_be_visible()

            # pause: sticky (held) until resumed
            page.click("#pause")
            expect(page.locator("#status .badge")).to_have_text("held", timeout=60_000)
            held_turns = int(chart.get_attribute("data-turns"))
            assert held_turns < 4
            page.screenshot(path=str(shots / "dashboard-held.png"), full_page=True)
            page.click("#resume")
            expect(page.locator("#status .badge")).to_have_text("done", timeout=120_000)
            wait_for(lambda: chart.get_attribute("data-turns") == "4", what="all four turns charted")
            expect(page.locator("#summary")).to_contain_text("budget_spent")
            expect(page.locator("#answer strong")).to_have_text("38.4 metres")
            expect(page.locator("#answer")).to_contain_text("<script>alert(1)</script>")  # shown as text, not run
            page.click("#files .file[data-path='trace.jsonl']")
            expect(page.locator("#viewer pre")).to_contain_text('"type": "resume"')
            page.screenshot(path=str(shots / "dashboard-done.png"), full_page=True)

            # sweeps: the list, one sweep's table (filter by axis, sort), its figures rendered on demand
            page.goto(app.url + "/sweeps")
            page.click("#sweeps a:text-is('demo')")
            expect(page.locator("#runs tbody tr")).to_have_count(4)
            page.select_option("select[data-axis=tools]", "grep_only")
            expect(page.locator("#runs tbody tr")).to_have_count(2)
            page.click("#runs th[data-col=budget]")
            page.click("#runs th[data-col=budget]")
            expect(page.locator("#runs tbody tr").first).to_contain_text("grep_only-b2")
            page.click("#render")
            img = page.locator("#figures img[alt='tool_choice.png']")
            expect(img).to_be_visible(timeout=180_000)
            wait_for(lambda: img.evaluate("el => el.complete && el.naturalWidth") > 0, what="the figure to load")
            page.screenshot(path=str(shots / "sweep.png"), full_page=True)
            page.click("#runs tbody tr >> nth=0 >> a")
            expect(page.locator("#status .badge")).to_have_text("complete")
            expect(page.locator("#controls")).to_be_hidden()
            page.screenshot(path=str(shots / "sweep-run.png"), full_page=True)
            browser.close()
            assert errors == []
    assert sorted(p.name for p in shots.iterdir()) == ["dashboard-done.png", "dashboard-held.png", "dashboard-live.png", "home.png",
                                                       "sweep-run.png", "sweep.png"]
