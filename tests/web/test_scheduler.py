"""The web scheduler's rules with no model and no processes: FIFO, preemption, backfill, sticky pause, restart recovery."""

from __future__ import annotations

import pandas as pd
import pytest

import searchbox.run.runner as run_mod
from searchbox.web.scheduler import Scheduler, SchedulerError
from tests.conftest import make_cfg
from tests.fakes.scripted_server import ScriptedServer


@pytest.fixture
def sched(tmp_path):
    s = Scheduler(tmp_path / "jobs.sqlite")
    yield s
    s.close()


def submit(s, name):
    return s.submit(name, {"question": f"q {name}", "budget": 2}, f"/runs/{name}")


def launched(s):
    return [(l.kind, l.job.id) for l in s.step()]


def states(s):
    return {j.id: j.state for j in s.jobs()}


def test_foreground_fifo_one_slot(sched):
    for name in ("a", "b", "c"):
        submit(sched, name)
    assert launched(sched) == [("start", "a")]
    # b and c were queued before a started: they wait in order and do not preempt a
    assert launched(sched) == []
    assert sched.get("a").pause_request is None
    sched.exited("a", "budget_spent")
    assert launched(sched) == [("start", "b")]
    sched.exited("b", "first_turn_done")
    assert launched(sched) == [("start", "c")]
    sched.exited("c", "budget_spent")
    assert states(sched) == {"a": "done", "b": "done", "c": "done"}


def test_new_job_preempts_running_one_which_resumes_ahead_of_backfill(sched):
    submit(sched, "old")
    launched(sched)
    sched.exited("old", "interrupted")  # e.g. stopped from outside: plain backfill candidate
    assert sched.get("old").state == "paused" and not sched.get("old").preempted
    submit(sched, "a")
    assert launched(sched) == [("start", "a")]  # the queue goes before backfill
    submit(sched, "b")
    assert launched(sched) == []  # no free slot yet: a is asked to pause
    assert sched.get("a").pause_request == "preempt"
    sched.exited("a", "paused")
    assert sched.get("a").state == "paused" and sched.get("a").preempted
    assert launched(sched) == [("start", "b")]
    sched.exited("b", "budget_spent")
    # the preempted job resumes before the older backfill candidate
    assert launched(sched) == [("resume", "a")]
    sched.exited("a", "budget_spent")
    assert launched(sched) == [("resume", "old")]


def test_nested_preemption_resumes_most_recent_first(sched):
    submit(sched, "a")
    launched(sched)
    submit(sched, "b")
    launched(sched)
    sched.exited("a", "paused")
    assert launched(sched) == [("start", "b")]
    submit(sched, "c")
    launched(sched)
    assert sched.get("b").pause_request == "preempt"
    sched.exited("b", "paused")
    assert launched(sched) == [("start", "c")]
    sched.exited("c", "budget_spent")
    assert launched(sched) == [("resume", "b")]
    sched.exited("b", "budget_spent")
    assert launched(sched) == [("resume", "a")]


def test_auto_backfill_oldest_paused_and_still_preemptible(sched):
    for name in ("a", "b"):
        submit(sched, name)
        launched(sched)
        sched.exited(name, "interrupted")  # both end up in the pool, not preempted
    assert launched(sched) == [("resume", "a")]  # the oldest first
    submit(sched, "new")
    assert launched(sched) == []
    assert sched.get("a").pause_request == "preempt"  # backfill gives way to foreground work
    sched.exited("a", "paused")
    assert launched(sched) == [("start", "new")]


def test_a_job_that_finishes_while_asked_to_pause_is_done(sched):
    submit(sched, "a")
    launched(sched)
    submit(sched, "b")
    launched(sched)
    sched.exited("a", "budget_spent")
    assert sched.get("a").state == "done"
    assert launched(sched) == [("start", "b")]


def test_user_pause_is_sticky_until_resume(sched):
    submit(sched, "a")
    launched(sched)
    assert sched.hold("a").pause_request == "hold"
    sched.exited("a", "paused")
    assert sched.get("a").state == "held"
    for _ in range(3):
        assert launched(sched) == []  # idle, yet a held job is never backfilled
    submit(sched, "b")
    assert launched(sched) == [("start", "b")]
    sched.exited("b", "budget_spent")
    assert launched(sched) == []
    sched.resume("a", {"budget": 5})
    assert sched.get("a").state == "queued" and sched.get("a").spec["budget"] == 5  # the foreground queue
    assert launched(sched) == [("resume", "a")]


def test_hold_queued_and_paused_jobs(sched):
    submit(sched, "run")
    launched(sched)
    submit(sched, "q")
    sched.hold("q")  # never started: held at once, and released back into the queue
    assert sched.get("q").state == "held"
    assert sched.get("run").pause_request is None  # a held job preempts nobody
    sched.resume("q")
    assert sched.get("q").state == "queued"
    sched.exited("run", "budget_spent")
    assert launched(sched) == [("start", "q")]


def test_resume_while_pause_pending_keeps_the_slot(sched):
    submit(sched, "a")
    launched(sched)
    sched.hold("a")
    sched.resume("a")
    assert sched.get("a").state == "running" and sched.get("a").pause_request == "resumed"
    sched.exited("a", "paused")  # it stopped before the PAUSE file was removed: it comes right back
    assert launched(sched) == [("resume", "a")]


def test_bad_transitions_raise(sched):
    submit(sched, "a")
    with pytest.raises(SchedulerError, match="only held"):
        sched.resume("a")
    with pytest.raises(SchedulerError, match="no such job"):
        sched.hold("zzz")
    launched(sched)
    sched.exited("a", "budget_spent")
    with pytest.raises(SchedulerError, match="done"):
        sched.hold("a")


def test_failures_and_cancel(sched):
    submit(sched, "a")
    launched(sched)
    sched.exited("a", None, "searchbox: refused entry '../x': path traversal")
    assert sched.get("a").state == "failed" and "traversal" in sched.get("a").error
    submit(sched, "b")
    launched(sched)
    sched.cancel("b")
    assert sched.get("b").pause_request == "cancel"
    sched.exited("b", "paused")
    assert sched.get("b").state == "cancelled"
    sched.resume("a")  # a retry queues in the foreground
    assert launched(sched) == [("resume", "a")]


def test_n_slots(tmp_path):
    s = Scheduler(tmp_path / "j.sqlite", slots=2)
    for name in ("a", "b", "c"):
        submit(s, name)
    assert launched(s) == [("start", "a"), ("start", "b")]
    assert launched(s) == []  # c waited with them: FIFO, no preemption
    submit(s, "d")
    launched(s)
    # c is first in line and was queued before both started, so it preempts no one; d waits behind it
    assert [j.pause_request for j in (s.get("a"), s.get("b"))] == [None, None]
    s.exited("a", "budget_spent")
    # c takes the free slot; d was queued after b started, so b is asked to make room
    assert launched(s) == [("start", "c")]
    assert s.get("b").pause_request == "preempt" and s.get("c").pause_request is None
    submit(s, "e")
    launched(s)
    assert s.get("c").pause_request == "preempt"  # e, queued after c started, takes c's slot
    s.exited("b", "paused")
    s.exited("c", "paused")
    assert launched(s) == [("start", "d"), ("start", "e")]
    s.exited("d", "budget_spent")
    assert launched(s) == [("resume", "c")]  # the most recently preempted first
    s.close()


def test_restart_recovery(tmp_path):
    db = tmp_path / "jobs.sqlite"
    s = Scheduler(db, slots=2)
    for name in ("run", "holding", "queued", "held"):
        submit(s, name)
    s.hold("held")
    launched(s)  # run and holding start
    s.hold("holding")  # pause requested, process not stopped yet
    s.close()  # the server dies here

    s2 = Scheduler(db, slots=2)
    st = states(s2)
    assert st == {"run": "paused", "holding": "held", "queued": "queued", "held": "held"}
    assert s2.get("run").preempted
    kinds = launched(s2)
    assert ("start", "queued") in kinds and ("resume", "run") in kinds
    assert s2.get("held").state == "held" and s2.get("holding").state == "held"
    s2.close()


def test_shutdown_preempts_running_jobs_into_the_pool(sched):
    submit(sched, "a")
    launched(sched)
    assert [j.id for j in sched.preempt_all()] == ["a"]
    sched.exited("a", "paused")
    assert sched.get("a").state == "paused" and sched.get("a").preempted


# ---- preparing: an index build outside the slots (issue 21) --------------------------------------
def test_a_preparing_job_holds_no_slot_and_queues_as_a_new_arrival(sched):
    sched.submit("idx", {"question": "needs an index", "budget": 1}, "/runs/idx", prepare=True)
    assert sched.get("idx").state == "preparing"
    submit(sched, "b")
    assert launched(sched) == [("start", "b")]  # the slot goes to b while idx's index is built
    assert launched(sched) == []
    assert sched.prepared("idx", True, {"seconds": 3.0, "chunks": 7, "built": True}).state == "queued"
    assert sched.get("idx").prepare == {"seconds": 3.0, "chunks": 7, "built": True}
    assert launched(sched) == []
    assert sched.get("b").pause_request == "preempt"  # ready now, it arrives like a new job: b makes room
    sched.exited("b", "paused")
    assert launched(sched) == [("start", "idx")]
    sched.exited("idx", "budget_spent")
    assert launched(sched) == [("resume", "b")]


def test_hold_cancel_and_failure_while_preparing(tmp_path):
    db = tmp_path / "jobs.sqlite"
    s = Scheduler(db)
    for name in ("held", "cancelled", "broken", "restarted"):
        s.submit(name, {"question": name, "budget": 1}, f"/runs/{name}", prepare=True)
    assert s.hold("held").state == "preparing" and s.get("held").pause_request == "hold"  # its build goes on
    assert s.prepared("held", True, {}).state == "held"  # ready, but held until resumed
    assert s.resume("held").state == "queued"
    assert s.cancel("cancelled").state == "cancelled"
    assert s.prepared("cancelled", True, {}).state == "cancelled"  # a build that ends after the cancel changes nothing
    failed = s.prepared("broken", False, {"seconds": 1.0}, "building the index failed: searchbox: disk full")
    assert failed.state == "failed" and "disk full" in failed.error
    assert s.resume("broken").state == "preparing"  # a retry builds the index again, outside the slots
    s.close()
    s2 = Scheduler(db)  # after a restart the build starts over: still preparing
    assert s2.get("restarted").state == "preparing"
    s2.hold("restarted")
    assert s2.resume("restarted").pause_request is None  # the hold taken back before the build ended
    s2.close()


def test_every_waiting_job_says_why_and_where_it_stands(tmp_path):
    s = Scheduler(tmp_path / "jobs.sqlite")
    for name in ("a", "b", "c"):
        submit(s, name)
    launched(s)  # a runs; b and c waited with it (no preemption among them)
    s.submit("idx1", {"question": "i1", "budget": 1}, "/runs/idx1", prepare=True)
    s.submit("idx2", {"question": "i2", "budget": 1}, "/runs/idx2", prepare=True)
    s.submit("h", {"question": "h", "budget": 1}, "/runs/h")
    s.hold("h")
    w = s.waiting()
    assert "a" not in w  # running, nothing to explain
    assert (w["b"]["position"], w["b"]["of"], w["c"]["position"], w["b"]["after"]) == (1, 2, 2, ["a"])
    assert w["b"]["reason"] == "waiting for a model slot (1 of 1 model slot in use): it waits for those jobs to finish (it came after they started)"
    assert "building the index" in w["idx1"]["reason"] and "1st after the build in progress" in w["idx2"]["reason"]
    assert w["h"]["position"] is None and "until you resume it" in w["h"]["reason"]
    s.hold("a")
    w = s.waiting()
    assert "pausing after its current step, as you asked" in w["a"]["reason"] and "a running job is pausing" in w["b"]["reason"]
    s.exited("a", "paused")
    assert s.waiting()["b"]["reason"].startswith("a slot is free")
    s.close()

    s = Scheduler(tmp_path / "two.sqlite")
    submit(s, "old")
    launched(s)
    submit(s, "new")
    launched(s)  # new came after old started: old makes room
    assert "to make room for a newer job" in s.waiting()["old"]["reason"]
    s.exited("old", "paused")
    launched(s)
    w = s.waiting()["old"]
    assert (w["position"], w["of"]) == (1, 1) and "paused to make room for a newer job; it resumes by itself" in w["reason"]
    s.close()


def test_an_explicit_resume_runs_ahead_of_backfill(sched):
    """The design's foreground FIFO: the job the user resumes goes next, not after jobs paused longer ago."""
    submit(sched, "old")
    launched(sched)
    sched.exited("old", "interrupted")  # stopped from outside: a backfill candidate
    submit(sched, "mine")
    assert launched(sched) == [("start", "mine")]
    sched.hold("mine")
    sched.exited("mine", "paused")
    assert sched.get("mine").state == "held"
    assert launched(sched) == [("resume", "old")]  # the idle slot backfills
    sched.exited("old", "interrupted")
    sched.resume("mine")  # the user's resume: ahead of the older backfill candidate
    assert sched.get("mine").state == "queued"
    assert sched.waiting()["mine"]["position"] == 1 and sched.waiting()["old"]["position"] == 2
    assert launched(sched) == [("resume", "mine")]


def test_an_explicit_resume_preempts_a_backfilled_job(sched):
    submit(sched, "a")
    launched(sched)
    sched.hold("a")
    sched.exited("a", "paused")
    submit(sched, "b")
    launched(sched)
    sched.exited("b", "interrupted")
    assert launched(sched) == [("resume", "b")]  # b backfills the free slot
    sched.resume("a")
    assert launched(sched) == []
    assert sched.get("b").pause_request == "preempt"  # the backfilled job makes room for the resumed one
    sched.exited("b", "paused")
    assert launched(sched) == [("resume", "a")]


def test_preemption_switched_off(tmp_path):
    s = Scheduler(tmp_path / "jobs.sqlite", preempt=False)
    submit(s, "a")
    launched(s)
    submit(s, "b")
    assert launched(s) == [] and s.get("a").pause_request is None  # nobody is paused for b
    assert "preemption is off" in s.waiting()["b"]["reason"]
    s.exited("a", "budget_spent")
    assert launched(s) == [("start", "b")]
    s.close()


def test_auto_backfill_switched_off(tmp_path):
    s = Scheduler(tmp_path / "jobs.sqlite", backfill=False)
    submit(s, "a")
    launched(s)
    s.exited("a", "interrupted")  # stopped from outside, not by the user
    for _ in range(3):
        assert launched(s) == []  # idle, and still not backfilled
    assert s.waiting()["a"]["position"] is None and "auto-backfill is off" in s.waiting()["a"]["reason"]
    submit(s, "b")
    assert launched(s) == [("start", "b")]
    s.close()


def test_a_preempted_job_still_comes_back_without_backfill(tmp_path):
    s = Scheduler(tmp_path / "jobs.sqlite", backfill=False)
    submit(s, "a")
    launched(s)
    submit(s, "b")
    launched(s)
    assert s.get("a").pause_request == "preempt"
    s.exited("a", "paused")  # preempted for b: the system moved it, so the system brings it back
    assert launched(s) == [("start", "b")]
    s.exited("b", "budget_spent")
    assert launched(s) == [("resume", "a")]
    s.close()


# ---- resume continues the same run (the harness side, SPEC §11) ---------------------------------
SCRIPT = []
for _t in range(4):
    SCRIPT += [{"tool_calls": [{"name": "ls", "arguments": {"path": "dataroom"}}]},
               {"tool_calls": [{"name": "grep", "arguments": {"pattern": "Gannet", "path": "dataroom"}}]},
               {"content": f"answer after turn {_t + 1}"}]

COMPARED = ["turn", "prompt_tokens", "completion_tokens", "cached_tokens", "prompt_tokens_cum", "completion_tokens_cum",
            "cached_tokens_cum", "context_tokens", "llm_calls", "tool_calls", "answer_chars", "ended_by"]


def test_paused_after_turn_2_and_resumed_matches_a_straight_run(tmp_path):
    if not hasattr(run_mod, "resume"):
        pytest.skip("searchbox.run.runner.resume (the harness's resume) has not landed yet")
    straight_dir, paused_dir = tmp_path / "straight", tmp_path / "paused"
    with ScriptedServer(list(SCRIPT)) as srv:
        straight = run_mod.execute(make_cfg(budget=4, sandbox="none"), "How tall is Gannet Rock?", None, straight_dir, srv.url)

    def after_two_turns():
        path = paused_dir / "turns.parquet"
        return path.exists() and len(pd.read_parquet(path)) >= 2

    with ScriptedServer(list(SCRIPT)) as srv:
        first = run_mod.execute(make_cfg(budget=3, sandbox="none"), "How tall is Gannet Rock?", None, paused_dir, srv.url,
                                should_pause=after_two_turns)
        assert first["stop_reason"] == "paused" and first["turns"] == 2
        resumed = run_mod.resume(paused_dir, srv.url, budget=4)
    assert resumed["stop_reason"] == "budget_spent" and resumed["turns"] == 4
    assert resumed["run_id"] == first["run_id"]
    assert resumed["tokens"] == straight["tokens"]
    a = pd.read_parquet(straight_dir / "turns.parquet")[COMPARED]
    b = pd.read_parquet(paused_dir / "turns.parquet")[COMPARED]
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
    assert b["prompt_tokens"].sum() == resumed["tokens"]["prompt"]

