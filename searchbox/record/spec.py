"""The resolved run: one plain object holding everything a run uses that can change its result.

`searchbox.run.identity.resolve` builds it once from the config, the question, the dataroom's content identity and
what served the run; the run key is the hash of exactly this object (RunSpec.key), and the harness then sends what it
holds (its system prompt, its protocol, its request's fixed fields, its harness's task) rather than deriving them
again. It is written beside the run as key.json, so a key can be explained and a run redone from it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from ..config import stable_hash


@dataclass(frozen=True)
class RunSpec:
    config: dict  # the semantic config (RunConfig.semantic), its date resolved
    question_id: str
    question: str
    dataroom: str  # the dataroom's content identity (noise mixed in is keyed by the config's noise section)
    served: dict  # what served the run (model.served.served_key): weights and build, a model id, or the control
    prompt: dict  # protocol, protocol_version, tools (with their limits), system (as sent), request (its fixed fields)
    gold_read: Optional[dict] = None  # the gold fields a control reads (a model never sees the gold)
    server_args: Optional[list] = None  # model.server_args that can change the numbers (none for a control)
    harness: dict = field(default_factory=dict)  # what the harness adds (Pi: its pin, extension, task...); {} for native

    def key_inputs(self) -> dict:
        """What the key hashes, as plain data. The native loop adds no `harness` entry, so its keys stay as they were."""
        inputs: dict[str, Any] = {"config": self.config, "question_id": self.question_id or "", "question": self.question,
                                  "dataroom": self.dataroom, "served": self.served, "prompt": self.prompt,
                                  "gold_read": self.gold_read, "server_args": self.server_args}
        if self.harness:
            inputs["harness"] = self.harness
        return inputs

    @property
    def key(self) -> str:
        """The run's identity: what decides its result, and nothing that only changes how it was carried out."""
        return stable_hash(self.key_inputs())

    @classmethod
    def from_dict(cls, data: dict) -> "RunSpec":
        """Back from key_inputs (key.json); a field of the wrong kind is a ValueError naming it."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        kinds = {"config": dict, "question_id": str, "question": str, "dataroom": str, "served": dict, "prompt": dict,
                 "gold_read": (dict, type(None)), "server_args": (list, type(None)), "harness": dict}
        unknown = set(data) - set(kinds)
        if unknown:
            raise ValueError(f"unknown field {sorted(unknown)[0]!r}")
        for name, kind in kinds.items():
            if name in data and not isinstance(data[name], kind):
                raise ValueError(f"{name}: expected {kind}")
        for name in ("protocol", "system", "request"):
            if name not in data.get("prompt", {}):
                raise ValueError(f"prompt.{name} is missing")
        return cls(**{k: v for k, v in data.items()})

    def describe(self) -> str:
        """key_inputs as JSON for people (key.json beside a run)."""
        return json.dumps(self.key_inputs(), indent=2, sort_keys=True, default=str)

    # ---- what the harness sends, read from here and nowhere else
    @property
    def protocol(self) -> str:
        return self.prompt["protocol"]

    @property
    def system(self) -> str:
        return self.prompt["system"]

    @property
    def request(self) -> dict:
        """The request's fixed fields (native `tools`, json `response_format`): every model call sends these."""
        return self.prompt["request"]

    @property
    def today(self) -> str:
        return self.config["harness"]["today"]
