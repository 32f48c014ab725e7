"""The web app in a real browser: Playwright driving Debian's chromium headless (never a downloaded browser).

Every page is photographed on the way (desktop 1400 px and phone 390 px) into $SEARCHBOX_SCREENSHOTS, else
outputs/screenshots/ in the repository (kept after the run: look at them).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.fakes.scripted_server import ScriptedServer
from tests.fakes.webapp import LiveApp, make_sweep, turn_script, wait_for
from tests.web.test_web import dataroom_zip

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
REPO = Path(__file__).resolve().parents[2]
DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)")


@pytest.fixture
def shots(request) -> Path:
    """A folder per test for its screenshots, kept after the run."""
    root = Path(os.environ.get("SEARCHBOX_SCREENSHOTS") or REPO / "outputs" / "screenshots")
    folder = root / request.node.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (pip install -e '.[dev]')")
    sync_api.expect.set_options(timeout=30_000)  # a shared, busy machine: waits, not timing assertions
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def new_page(browser, viewport=DESKTOP):
    page = browser.new_page(viewport=viewport)
    page.sb_errors = []
    page.on("pageerror", lambda exc: page.sb_errors.append(str(exc)))
    return page


def expect():
    from playwright.sync_api import expect as e

    return e


WIDEST = """limit => { const out = []; for (const el of document.querySelectorAll('body *')) {
  const r = el.getBoundingClientRect(), spills = el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX === 'visible';
  if ((r.right <= limit + 1 && !spills) || el.offsetParent === null) continue;
  let p = el.parentElement, clipped = false;
  while (p) { if (getComputedStyle(p).overflowX !== 'visible' && p.getBoundingClientRect().right <= limit + 1) { clipped = true; break; } p = p.parentElement; }
  if (!clipped) out.push(`${el.tagName}.${el.className}#${el.id}: ${Math.round(r.right)} px`); } return out.slice(0, 8); }"""


def no_sideways_scroll(page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    limit = page.viewport_size["width"]
    assert width <= limit, f"the page scrolls sideways: {width} px wide; past the edge: {page.evaluate(WIDEST, limit)}"


def job_script() -> list[dict]:
    """Turn 1 reads, runs a program that does not exist (exit 127) and prints a long line; then turn_script's turns."""
    first = [{"sleep": 0.45, "tool_calls": [{"name": "ls", "arguments": {"path": "dataroom"}}]},
             {"sleep": 0.45, "tool_calls": [{"name": "bash", "arguments": {"command": "grep -ri gannet dataroom | head -n 3"}}]},
             {"sleep": 0.45, "tool_calls": [{"name": "bash", "arguments": {"command": "no-such-program --help"}}]},
             {"sleep": 0.45, "tool_calls": [{"name": "bash", "arguments": {"command": "printf 'long:%4000s:end' x"}}]},
             {"sleep": 0.45, "tool_calls": [{"name": "write", "arguments": {"path": "ANSWER.md", "content": "# Answer\n\n**38.4 metres** <script>alert(1)</script>"}}]},
             {"sleep": 0.45, "content": "Answered in turn 1."}]
    return first + turn_script(4, sleep=0.45)[4:]


def test_a_job_from_the_form_to_its_finished_run_page(tmp_path, browser, shots):
    e = expect()
    with ScriptedServer(job_script()) as srv, LiveApp(tmp_path / "out", srv.url) as app:
        page = new_page(browser)
        # home: the catalog's tiers with a master toggle each; a preset sets the checkboxes
        page.goto(app.url + "/")
        e(page.locator("#tiers .tier")).to_have_count(3)
        page.click("#presets button:text-is('grep_only')")
        assert page.is_checked("#tool-grep") and not page.is_checked("#tool-bash")
        page.click("#presets button:text-is('none')")
        assert page.is_checked("#tool-bash") and not page.is_checked("#tool-search_dataroom")
        page.uncheck("#tier-builtin")
        assert not page.is_checked("#tool-read")
        page.check("#tier-builtin")
        page.fill("#question", "How tall is the Gannet Rock lighthouse?")
        page.fill("#budget", "4")
        room = tmp_path / "room.zip"
        room.write_bytes(dataroom_zip())
        page.set_input_files("#dataroom", str(room))  # the small dataroom (its wrapper folder is stripped)
        page.screenshot(path=str(shots / "home.png"), full_page=True)
        page.click("#submit")
        page.wait_for_url("**/runs/web/jobs/**")

        # live: charts and the transcript grow; the gauge and the protocol are there from the first call
        chart, calls = page.locator("#tokens-chart"), page.locator("#feed .item.call")
        wait_for(lambda: calls.count() >= 2, what="the first model calls in the transcript")
        e(page.locator("#ctx-text")).to_contain_text("/ 8,192 tokens at the last call")
        e(page.locator("#summary dd[data-k=protocol]")).to_have_text("native")
        e(page.locator("#summary dd[data-k='context window']")).to_have_text("8,192 tokens")
        e(page.locator("#feed .item.system summary")).to_contain_text("System prompt")
        e(page.locator("#feed .item.user pre")).to_have_text("How tall is the Gannet Rock lighthouse?")
        e(page.locator("#crumbs a:text-is('Jobs')")).to_be_visible()
        wait_for(lambda: int(chart.get_attribute("data-turns")) >= 1, what="a first chart point")
        page.screenshot(path=str(shots / "dashboard-live.png"), full_page=True)

        # pause says what it does; the job is held until resumed
        pause = page.locator("#actions button[data-action=pause]")
        e(pause).to_have_text("Pause")
        assert "stays paused (held) until you resume it" in pause.get_attribute("title")
        wait_for(lambda: int(chart.get_attribute("data-turns")) >= 1 and calls.count() >= 6, what="turn 1 done")
        pause.click()
        e(page.locator("#flash")).to_contain_text("Pause: Pause after the current step")  # what it did, in words
        e(page.locator("#status .badge")).to_have_text("held", timeout=60_000)
        e(page.locator("#wait")).to_contain_text("it stays paused until you resume it")
        held_turns = int(chart.get_attribute("data-turns"))
        assert held_turns < 4
        page.screenshot(path=str(shots / "dashboard-held.png"), full_page=True)
        page.click("#actions button[data-action=resume]")
        e(page.locator("#status .badge")).to_have_text("done", timeout=120_000)
        wait_for(lambda: chart.get_attribute("data-turns") == "4", what="all four turns charted")

        # finished: the point of the run and what it cost
        e(page.locator("#summary dd[data-k='stop reason']")).to_contain_text("budget_spent")
        e(page.locator("#summary dd[data-k=model]")).to_have_text("scripted-model")  # a web job (the CLI at an endpoint) is labelled by what served it
        e(page.locator("#summary dd[data-k='tool calls']")).to_contain_text("1 error (0 refused or failed, 1 bash non-zero exit)")
        e(page.locator("#tool-dist")).not_to_contain_text("none yet")
        e(page.locator("#tool-dist [data-tool='bash: grep']")).to_be_visible()
        e(page.locator("#feed .tool.fail .status").first).to_contain_text("exit 127")
        e(page.locator("#answer strong")).to_have_text("38.4 metres")
        e(page.locator("#answer")).to_contain_text("<script>alert(1)</script>")  # shown as text, not run
        e(page.locator("#grades")).to_contain_text("No gold answer recorded")
        assert int(page.locator("#tps-chart").get_attribute("data-calls")) >= 8
        e(page.locator("#summary dd[data-k='tokens/s']")).to_contain_text("out per call")
        e(page.locator("#time-legend")).to_contain_text("setup")
        # values on hover: the legend under a chart shows the point under the cursor
        box = page.locator("#tokens-chart .u-over").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.02, box["y"] + box["height"] / 2)
        e(page.locator("#tokens-chart .u-legend .u-series").nth(0)).to_contain_text("turn 1")
        # the transcript: a long output opens whole; search finds text inside it
        more = page.locator("#feed .tool", has=page.locator("pre.args", has_text="printf")).locator("button.more")
        e(more).to_contain_text("show all")
        more.click()
        e(page.locator("#feed pre.out", has_text=":end")).to_have_count(1)
        page.fill("#search", "no-such-program")
        e(page.locator("#search-count")).to_contain_text("match")
        e(page.locator("#feed mark").first).to_have_text("no-such-program")
        page.check("#only-hits")
        assert page.locator("#feed .item:visible").count() == page.locator("#feed .item.hit").count() >= 1
        page.click("#search-next")
        e(page.locator("#feed .item.current")).to_have_count(1)
        page.uncheck("#only-hits")
        page.fill("#search", "")
        # the process log of the job: both launches
        page.click("#log-details summary")
        e(page.locator("#log")).to_contain_text("=== start")
        e(page.locator("#log")).to_contain_text("=== resume")
        page.click("#files .file[data-path='trace.jsonl']")
        e(page.locator("#viewer pre")).to_contain_text('"type": "resume"')
        page.screenshot(path=str(shots / "dashboard-done.png"), full_page=True)
        phone = new_page(browser, PHONE)
        phone.goto(page.url)
        e(phone.locator("#status .badge")).to_have_text("done")
        no_sideways_scroll(phone)
        phone.screenshot(path=str(shots / "dashboard-phone.png"), full_page=True)
        assert page.sb_errors == [] and phone.sb_errors == []


def test_scheduling_says_why_jobs_wait_and_what_each_button_does(tmp_path, browser, shots):
    """Queue positions and reasons, Pause vs Hold, Cancel asks first, terminal states named, a job held before it
    started, and a job preparing its index outside the slot: on the home page, on the run page and at phone width."""
    e = expect()
    from searchbox.retrieval.index.store import LOCK
    from searchbox.web import prepare

    room = tmp_path / "room.zip"
    room.write_bytes(dataroom_zip())
    folder = prepare.index_folder({"tool_names": ["search_dataroom"], "tools": "high", "dataroom": str(room)})
    folder.mkdir(parents=True)
    lock = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)  # the index build waits for this "other writer": the job stays preparing
    slow = [{"sleep": 0.6, "tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}] * 400
    try:
        with ScriptedServer(slow) as srv, LiveApp(tmp_path / "out", srv.url) as app:
            def submit(question):
                return app.post("/api/jobs", data={"question": question, "budget": "50", "tools": "none"}).json()["job"]

            first = submit("first: preempted by the second")
            wait_for(lambda: app.get(f"/api/jobs/{first['id']}").json()["job"]["state"] == "running", what="first to run")
            wait_for(lambda: (app.app.state.runner.run_dir(first["id"]) / "trace.jsonl").exists(), what="first's trace")
            second = submit("second: takes the slot")
            third = submit("third: waits in line")
            held = submit("held before it started")
            app.post(f"/api/jobs/{held['id']}/pause")
            gone = submit("cancelled while queued")
            app.post(f"/api/jobs/{gone['id']}/cancel")
            indexed = app.post("/api/jobs", data={"question": "needs its index built", "budget": "1", "tools": "high"},
                               files={"dataroom": ("room.zip", room.read_bytes(), "application/zip")}).json()["job"]
            assert indexed["state"] == "preparing"
            app.wait_job(first["id"], ("paused",))
            app.wait_job(second["id"], ("running",))

            page = new_page(browser)
            page.goto(app.url + "/")
            row = lambda job: page.locator(f".job[data-job='{job['id']}']")
            e(row(first).locator(".wait")).to_contain_text("2 of 2 in line for a model slot")
            e(row(first).locator(".wait")).to_contain_text("paused to make room for a newer job; it resumes by itself")
            e(row(third).locator(".wait")).to_contain_text("1 of 2 in line for a model slot")
            e(row(first).locator("button[data-action=pause]")).to_have_text("Hold")  # not "Pause": it is paused already
            assert "will not resume by itself until you resume it" in row(first).locator("button[data-action=pause]").get_attribute("title")
            e(row(second).locator("button[data-action=pause]")).to_have_text("Pause")
            e(row(held).locator("button[data-action=resume]")).to_have_text("Resume")
            e(row(held).locator(".wait")).to_contain_text("it stays paused until you resume it")
            e(row(gone).locator(".badge")).to_have_text("cancelled")
            e(row(gone)).to_contain_text("cancelled by you")
            e(row(gone)).not_to_contain_text("paused")
            assert row(gone).locator("button").count() == 0
            e(row(indexed).locator(".badge")).to_have_text("preparing")
            e(row(indexed)).to_contain_text("building the index of its dataroom, outside the model slots")
            e(row(indexed).locator("[data-progress]")).to_contain_text("building index")
            page.screenshot(path=str(shots / "home-jobs.png"), full_page=True)
            assert page.evaluate("progressText({stage: 'embed', done: 1200, total: 4640, seconds: 12})") == \
                "building index 1,200 / 4,640 chunks (25%) · 12.0s"

            # cancel asks first: dismissed, nothing happens; accepted, the job is cancelled and says so
            page.once("dialog", lambda d: d.dismiss())
            row(third).locator("button[data-action=cancel]").click()
            e(page.locator("#flash")).to_be_empty()
            assert app.get(f"/api/jobs/{third['id']}").json()["job"]["state"] == "queued"
            messages = []
            page.once("dialog", lambda d: (messages.append(d.message), d.accept()))
            row(third).locator("button[data-action=cancel]").click()
            e(page.locator("#flash")).to_contain_text("Cancel: Stop it for good")
            e(row(third).locator(".badge")).to_have_text("cancelled")
            assert "cannot be resumed" in messages[0]

            # the run page of a job held before it started: its state, not "…" and empty charts
            page.goto(app.url + held["url"])
            e(page.locator("#question")).to_have_text("held before it started")
            e(page.locator("#not-started")).to_contain_text("Held before it started: nothing has run yet")
            e(page.locator("#charts")).to_be_hidden()
            page.screenshot(path=str(shots / "run-held-before-start.png"), full_page=True)
            # the run page of a preparing job: its progress
            page.goto(app.url + indexed["url"])
            e(page.locator("#progress")).to_be_visible()
            e(page.locator("#progress-text")).to_contain_text("building index")
            e(page.locator("#not-started")).to_contain_text("its dataroom's index is being built outside the model slots")
            page.screenshot(path=str(shots / "run-preparing.png"), full_page=True)

            # phone width: every job's actions are on screen, nothing scrolls sideways
            phone = new_page(browser, PHONE)
            phone.goto(app.url + "/")
            e(phone.locator(f".job[data-job='{second['id']}'] button[data-action=pause]")).to_be_visible()
            for button in phone.locator(".job button").all():
                box = button.bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
            no_sideways_scroll(phone)
            phone.screenshot(path=str(shots / "home-phone.png"), full_page=True)

            fcntl.flock(lock, fcntl.LOCK_UN)  # the build goes on: the job leaves `preparing`
            app.wait_job(indexed["id"], ("queued", "running", "paused", "done"), timeout=300)
            for job in (first, second, indexed):
                app.post(f"/api/jobs/{job['id']}/cancel")
            assert page.sb_errors == [] and phone.sb_errors == []
    finally:
        os.close(lock)


def test_a_sweep_its_runs_side_by_side_and_a_committed_result(tmp_path, browser, shots):
    e = expect()
    out = tmp_path / "out"
    with ScriptedServer([]) as srv:
        make_sweep(out, srv)
    committed = REPO / "results" / "grep_vs_vector"  # 640 runs, 152 columns, the figures drawn by searchbox.report
    big = out / "sweeps" / "grep_vs_vector"
    big.mkdir(parents=True)
    shutil.copy(committed / "runs.parquet", big)
    shutil.copytree(committed, out / "reports" / "grep_vs_vector", ignore=shutil.ignore_patterns("*.parquet", "LABEL.md"))
    with LiveApp(out, "http://127.0.0.1:9") as app:
        page = new_page(browser)
        page.goto(app.url + "/sweeps")
        page.click("#sweeps a:text-is('demo')")
        e(page.locator("#runs tbody tr")).to_have_count(4)
        heads = page.locator("#runs thead th").all_inner_texts()
        assert heads[:4] == ["run_id", "correct", "contains", "evidence_recall"], heads
        assert page.locator("#filters select").evaluate_all("els => els.map(e => e.dataset.axis)") == ["tools", "budget", "correct"]
        e(page.locator("#constants summary")).to_contain_text("The same in every run")
        page.select_option("select[data-axis=tools]", "grep_only")
        e(page.locator("#runs tbody tr")).to_have_count(2)
        page.click("#runs th[data-col=budget]")
        page.click("#runs th[data-col=budget]")
        e(page.locator("#runs tbody tr").first).to_contain_text("grep_only-b2")
        e(page.locator("#runs tbody tr").first.locator("td.score").first).to_have_text("1")
        page.select_option("select[data-axis=tools]", "")
        page.check("#all-cols")
        assert 10 < page.locator("#runs thead th").count() < 40
        page.uncheck("#all-cols")
        page.click("#render")
        img = page.locator("#figures figure[data-figure=tool_choice] img")
        e(img).to_be_visible(timeout=180_000)
        wait_for(lambda: img.evaluate("el => el.complete && el.naturalWidth") > 0, what="the figure to load")
        names = page.locator("#figures figure").evaluate_all("els => els.map(e => e.dataset.figure)")
        assert len(names) == len(set(names)) >= 3  # each figure once...
        assert page.locator("#summary img").count() == 0  # ...and not again in the summary
        page.screenshot(path=str(shots / "sweep.png"), full_page=True)

        # two runs side by side
        page.check("#runs tr[data-run='none-b1'] input.pick")
        page.check("#runs tr[data-run='grep_only-b1'] input.pick")
        page.click("#compare")
        page.wait_for_url("**/compare?**")
        e(page.locator("#sides section")).to_have_count(2)
        e(page.locator("#diff tr.differs th", has_text="correct")).to_have_count(1)
        e(page.locator("#sides [data-side=A]")).to_contain_text("none-b1")
        page.screenshot(path=str(shots / "compare.png"), full_page=True)

        # a run of the sweep: the point of it beside the answer, and the way back
        page.goto(app.url + "/runs/sweeps/demo/runs/grep_only-b2")
        e(page.locator("#status .badge")).to_have_text("complete")
        e(page.locator("#controls")).to_be_hidden()
        e(page.locator("#crumbs a:text-is('demo')")).to_have_attribute("href", "/sweeps/demo")
        e(page.locator("#grades .gold-answer")).to_have_text("38.4 metres")
        e(page.locator("#grades [data-grade=correct] .score")).to_have_text("1")
        e(page.locator("#grades ul.evidence li.good")).to_contain_text("reports/gannet-rock-survey.md")
        e(page.locator("#tool-dist")).not_to_contain_text("none yet")
        e(page.locator("#feed .item.system")).to_have_count(1)
        assert page.locator("#log-card").is_hidden()  # a sweep's run has no web job log
        page.screenshot(path=str(shots / "sweep-run.png"), full_page=True)
        page.goto(app.url + "/runs/sweeps/demo/runs/none-b1")
        e(page.locator("#grades [data-grade=correct] .score")).to_have_text("0")
        e(page.locator("#grades .verdict")).to_contain_text("why correct says so")
        e(page.locator("#grades .verdict")).to_contain_text("41")

        # a committed result: its figures (drawn by searchbox.report, under reports/) each once, scores first, no 152 columns
        page.goto(app.url + "/sweeps/grep_vs_vector")
        e(page.locator("#figures figure")).to_have_count(len(list(committed.glob("*.png"))))  # every figure the report drew, once
        e(page.locator("#runs tbody tr")).to_have_count(640)
        heads = page.locator("#runs thead th").all_inner_texts()
        assert heads[0] == "run_id" and heads[1] in ("correct", "contains") and "model" in heads and "delivery" in heads
        assert set(page.locator("#filters select").evaluate_all("els => els.map(e => e.dataset.axis)")) >= {"model", "tools", "delivery"}
        assert "budget" not in page.locator("#filters select").evaluate_all("els => els.map(e => e.dataset.axis)")  # one value
        page.check("#all-cols")
        assert page.locator("#runs thead th").count() < 60
        page.uncheck("#all-cols")
        # the run id stays in view while the table scrolls sideways
        wrap = page.locator(".table-wrap").first
        wrap.evaluate("el => { el.scrollLeft = 10000 }")
        cell_x = page.locator("#runs tbody tr").first.locator("td").first.bounding_box()["x"]
        assert abs(cell_x - wrap.bounding_box()["x"]) < 2
        assert page.locator("#summary img").count() == 0
        height = page.evaluate("document.documentElement.scrollHeight")
        assert height < 9764, height  # the page that repeated every figure in the summary was 9,764 px
        page.screenshot(path=str(shots / "sweep-committed.png"), full_page=True)

        phone = new_page(browser, PHONE)
        for path, name in (("/sweeps/grep_vs_vector", "sweep-phone.png"), ("/sweeps/demo", "sweep-demo-phone.png"),
                           ("/runs/sweeps/demo/runs/grep_only-b2", "sweep-run-phone.png"),
                           ("/compare?a=sweeps/demo/runs/none-b1&b=sweeps/demo/runs/grep_only-b1", "compare-phone.png")):
            phone.goto(app.url + path)
            phone.wait_for_load_state("networkidle")
            e(phone.locator("h1").first).not_to_have_text("…")
            no_sideways_scroll(phone)
            phone.screenshot(path=str(shots / name), full_page=True)
        assert page.sb_errors == [] and phone.sb_errors == []
    written = sorted(p.name for p in shots.iterdir())
    assert written == sorted(["sweep.png", "compare.png", "sweep-run.png", "sweep-committed.png", "sweep-phone.png",
                              "sweep-demo-phone.png", "sweep-run-phone.png", "compare-phone.png"]), written
    assert json.loads((out / "sweeps" / "demo" / "runs" / "none-b1" / "run_meta.json").read_text())["grades"]["correct"] == 0.0
