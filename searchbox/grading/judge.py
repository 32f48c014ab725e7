"""An LLM judge over the same OpenAI-compatible client; verdicts cached by what decides them.

The cache key is (the judge model id as the endpoint serves it, the endpoint, the prompt's hash,
the question, the gold answers, the graded answer). The served id comes from the endpoint's
/v1/models, not from configuration, so two servers behind one label never share verdicts.
"""

from __future__ import annotations

import hashlib
import math
import re
import sqlite3
from typing import Optional

from ..config import ModelConfig, stable_hash
from ..errors import ConfigError, ModelError
from ..model.llm import ChatClient
from ..paths import cache_dir

JUDGE_PROMPT = """You grade answers to questions about a document collection.
Question: {question}
Gold answer: {gold}
Other accepted forms: {aliases}
Candidate answer:
<<<
{answer}
>>>
Does the candidate answer state the gold answer (same fact; wording, units and formatting may differ)?
Reply with exactly one word: CORRECT or INCORRECT."""
PROMPT_HASH = hashlib.sha256(JUDGE_PROMPT.encode()).hexdigest()[:12]
# BrowseComp's style of judge: question, response and gold in; extracted answer, correct yes/no and confidence out.
BROWSECOMP_PROMPT = """Judge whether the following response to a question is correct, based on the precise and unambiguous gold answer below.
Question: {question}
Gold answer: {gold}
Other accepted forms: {aliases}
Response:
<<<
{answer}
>>>
Reply in exactly this format:
extracted_final_answer: the final exact answer extracted from the response, or None if there is none
reasoning: why the extracted answer is or is not the gold answer, judging only that (no new solving)
correct: yes or no (yes only when the extracted answer matches the gold answer, allowing small numerical or format differences)
confidence: the confidence stated in the response, as a percentage 0-100 (100 when it states none)"""
PROMPTS = {"searchbox": JUDGE_PROMPT, "browsecomp": BROWSECOMP_PROMPT}
PROMPT_HASHES = {name: hashlib.sha256(text.encode()).hexdigest()[:12] for name, text in PROMPTS.items()}
_YES_NO = re.compile(r"^\W*correct\W*:\W*(yes|no)\b", re.IGNORECASE | re.MULTILINE)
ANSWER_CHARS = 4000  # most of an answer shown to the judge
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_VERDICT = re.compile(r"\b(INCORRECT|CORRECT)\b")


def served_model(client: ChatClient, wanted: Optional[str]) -> str:
    """The id the endpoint serves for this judge, from /v1/models; ModelError when it cannot be told."""
    ids = client.served_model()["model_ids"]
    if not ids:
        raise ModelError(f"judge endpoint {client.root} does not list its models (/v1/models); cannot key judge verdicts")
    if wanted and wanted in ids:
        return wanted
    if len(ids) == 1:
        return ids[0]  # a one-model server (llama-server) answers whatever id is asked for
    raise ModelError(f"judge endpoint {client.root} serves {', '.join(ids)}; set grading.judge_model to one of them")


class Judge:
    """Grades (question, answer) pairs as CORRECT/INCORRECT; a verdict that cannot be had is NaN, never 0."""

    def __init__(self, client: ChatClient, model_label: Optional[str] = None, prompt: str = "searchbox"):
        if prompt not in PROMPTS:
            raise ConfigError(f"unknown judge prompt {prompt!r}: one of {', '.join(PROMPTS)}")
        self.prompt_name, self.prompt, self.prompt_hash = prompt, PROMPTS[prompt], PROMPT_HASHES[prompt]
        self.client = client
        self.wanted = client.cfg.model or model_label
        self.endpoint = client.root
        self._model_id: Optional[str] = None
        self.calls = 0
        self.db = sqlite3.connect(cache_dir("judge") / "verdicts.sqlite", timeout=60, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value REAL, raw TEXT, model TEXT, endpoint TEXT, prompt TEXT)")

    @classmethod
    def connect(cls, endpoint: str, model: Optional[str] = None, base: Optional[ModelConfig] = None, prompt: str = "searchbox") -> "Judge":
        """A judge at an endpoint; checks /v1/models now, so a wrong endpoint fails before any grading."""
        cfg = ModelConfig(**{**(base or ModelConfig()).__dict__, "model": model, "temperature": 0.0, "retries": 1})
        judge = cls(ChatClient(cfg, endpoint), prompt=prompt)
        judge.model_id  # noqa: B018 (resolve now)
        return judge

    @property
    def model_id(self) -> str:
        if self._model_id is None:
            self._model_id = served_model(self.client, self.wanted)
        return self._model_id

    def identity(self) -> dict:
        """What every judge grade records about its judge."""
        return {"judge_model": self.model_id, "judge_endpoint": self.endpoint, "judge_prompt": self.prompt_hash}

    def __call__(self, question: str, golds: list[str], answer: str) -> float:
        """1.0 correct, 0.0 incorrect, NaN without gold or without a usable verdict. Raises ModelError when unreachable."""
        if not golds:
            return math.nan
        if not answer.strip():
            return 0.0
        key = stable_hash(self.model_id, self.endpoint, self.prompt_hash, question, golds, answer, length=32)
        row = self.db.execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
        if row:
            return row[0]
        prompt = self.prompt.format(question=question, gold=golds[0], aliases=", ".join(golds[1:]) or "none", answer=answer[:ANSWER_CHARS])
        resp = self.client.chat({"messages": [{"role": "user", "content": prompt}], "max_tokens": 16 if self.prompt_name == "searchbox" else 512, "temperature": 0})
        self.calls += 1
        raw = _THINK.sub("", resp.message.get("content") or "").strip()
        if self.prompt_name == "browsecomp":
            found = [m.lower() for m in _YES_NO.findall(raw)]
            if not found:
                return math.nan
            value = 1.0 if found[-1] == "yes" else 0.0
        else:
            found = _VERDICT.findall(raw.upper())
            if not found:
                return math.nan  # not cached: a retry may get a verdict
            value = 0.0 if found[-1] == "INCORRECT" else 1.0
        self.db.execute("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?)", (key, value, raw[:200], self.model_id, self.endpoint, self.prompt_hash))
        return value
