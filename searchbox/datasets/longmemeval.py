"""LongMemEval: a JSON array of {question_id, question_type, question, answer, question_date, haystack_session_ids,
haystack_dates, haystack_sessions: [[{role, content, has_answer?}]], answer_session_ids}. One file per session, so the
haystack is a dataroom (sessions shared between questions are written once, by session id). Gold files: the answer
sessions; evidence: the turns marked has_answer. Abstention questions (id ending in _abs) keep their type with `-abs`."""

from __future__ import annotations

from pathlib import Path

from .source import records
from .writer import Output


def _session(turns: list, where) -> str:
    return "\n\n".join(f"[{t.get('role', '?')}] {t.get('content', '')}".rstrip() for t in turns)


def run(source: Path, out: Output) -> dict:
    for rec in records(Path(source)):
        qid = rec.text("question_id")
        question = rec.text("question", "question_id")
        answer = rec.text("answer", "question_id")
        ids = rec.items("haystack_session_ids", "question_id")
        sessions = rec.items("haystack_sessions", "question_id")
        dates = rec.items("haystack_dates", "question_id", required=False)
        if len(ids) != len(sessions):
            raise rec.fail("haystack_sessions", f"has {len(sessions)} sessions for {len(ids)} haystack_session_ids", "question_id")
        names, evidence = {}, []
        for i, (sid, turns) in enumerate(zip(ids, sessions)):
            if not isinstance(turns, list) or not all(isinstance(t, dict) and isinstance(t.get("content"), str) for t in turns):
                raise rec.fail(f"haystack_sessions[{i}]", "must be a list of {role, content} turns", "question_id")
            date = str(dates[i]) if i < len(dates) else ""
            names[str(sid)] = name = out.document(str(sid), _session(turns, rec), f"session {sid}" + (f" ({date})" if date else ""), date=date)
            evidence += [{"file": name, "text": t["content"].strip()} for t in turns if t.get("has_answer") is True and t["content"].strip()]
        gold = [names[str(s)] for s in rec.items("answer_session_ids", "question_id") if str(s) in names]
        if len(gold) < len(rec.items("answer_session_ids", "question_id")):
            out.dropped.add("answer session not in the haystack (gold file left out)", qid)
        qtype = rec.text("question_type", "question_id", required=False) + ("-abs" if qid.endswith("_abs") else "")
        date = rec.text("question_date", "question_id", required=False)
        out.question(qid, question + (f"\n\n(Asked on {date}.)" if date else ""), answer, gold_files=gold, evidence=evidence, type=qtype)
    out.notes.append("one dataroom holds every question's haystack (sessions by id); each question's date is appended to it")
    return {}
