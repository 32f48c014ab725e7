"""The web app by keyboard and on a phone (issue 31): a skip link, sortable headers and file entries reached with the
keyboard alone, the form's question sets and axes, and /sweeps at 390 px without sideways scrolling."""

from __future__ import annotations

import pytest

from tests.fakes.scripted_server import ScriptedServer
from tests.fakes.webapp import LiveApp, make_sweep, turn_script
from tests.web.test_browser import CHROMIUM, PHONE, browser, expect, new_page, no_sideways_scroll, shots  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)")


def _tab_to(page, selector: str, limit: int = 80) -> None:
    """Press Tab until `selector` has the focus (the keyboard alone, as a user would)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("sel => document.activeElement && document.activeElement.matches(sel)", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


def test_keyboard_only_skip_link_sorting_and_files(tmp_path, browser, shots):  # noqa: F811
    e = expect()
    out = tmp_path / "out"
    with ScriptedServer([]) as srv:
        make_sweep(out, srv)
    with LiveApp(out, "http://127.0.0.1:9") as app:
        page = new_page(browser)
        page.goto(app.url + "/sweeps/demo")
        e(page.locator("#runs tbody tr")).to_have_count(4)
        page.keyboard.press("Tab")  # the first stop is the skip link, shown when focused
        assert page.evaluate("document.activeElement.className") == "skip"
        e(page.locator("a.skip").first).to_be_visible()
        _tab_to(page, "#runs th[data-col=budget] button")
        page.keyboard.press("Enter")
        e(page.locator("#runs th[data-col=budget]")).to_have_attribute("aria-sort", "ascending")
        page.keyboard.press(" ")
        e(page.locator("#runs th[data-col=budget]")).to_have_attribute("aria-sort", "descending")
        assert page.evaluate("document.activeElement.textContent") == "budget"  # the focus stays on the header
        # The runs table's skip link jumps past every row.
        page.focus("a.skip[href='#after-runs']")
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "after-runs"
        # A run's file tree: entries are focusable and open with Enter.
        page.goto(app.url + "/runs/sweeps/demo/runs/grep_only-b1")
        entry = page.locator("#files .file[data-path='trace.jsonl']")
        e(entry).to_have_count(1)
        assert entry.get_attribute("tabindex") == "0"
        _tab_to(page, "#files .file[data-path='trace.jsonl']", limit=200)
        page.keyboard.press("Enter")
        e(page.locator("#viewer pre")).to_contain_text('"type"')
        page.screenshot(path=str(shots / "keyboard.png"), full_page=True)
        phone = new_page(browser, PHONE)
        for path in ("/sweeps", "/sweeps/demo", "/"):
            phone.goto(app.url + path)
            phone.wait_for_load_state("networkidle")
            no_sideways_scroll(phone)
        phone.screenshot(path=str(shots / "form-phone.png"), full_page=True)
        assert page.sb_errors == [] and phone.sb_errors == []


def test_the_form_takes_a_question_of_a_set_and_the_axes(tmp_path, browser, shots):  # noqa: F811
    import json

    e = expect()
    with ScriptedServer(turn_script(1)) as srv, LiveApp(tmp_path / "out", srv.url) as app:
        page = new_page(browser)
        page.goto(app.url + "/")
        page.select_option("#question_set", "tiny")
        e(page.locator("#question_id option")).to_have_count(7)  # "pick one" and the 6 tiny questions
        page.select_option("#question_id", "nw01")
        e(page.locator("#question")).to_have_value("How tall is the Gannet Rock lighthouse?")
        assert page.locator("#gold").is_disabled()
        page.select_option("#retriever", "bm25")
        page.fill("#temperature", "0.2")
        page.fill("#max_tokens", "128")
        page.fill("#budget", "1")
        page.click("#submit")
        page.wait_for_url("**/runs/**")
        job_id = page.url.rstrip("/").rsplit("/", 1)[-1]
        job = app.wait_job(job_id, ("done",))
        meta = json.loads((tmp_path / "out" / "web" / "jobs" / job["id"] / "run_meta.json").read_text())
        assert meta["gold"]["answer"] == "38.4 metres" and meta["question_id"] == "nw01"
        assert meta["config"]["retrieval"]["retriever"] == "bm25" and meta["config"]["model"]["max_tokens"] == 128
        page.screenshot(path=str(shots / "form-run.png"), full_page=True)
        assert page.sb_errors == []
