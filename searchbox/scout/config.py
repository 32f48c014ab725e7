"""The typed settings of a scout run: the round budget, the policy and the executor's limits."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..config import ModelConfig
from ..errors import ConfigError

POLICIES = ("model", "keyword")


@dataclass
class ExecutorLimits:
    """What one action may cost and show; every cap is reported to the model when it bites."""

    max_file_bytes: int = 1_000_000  # larger files are refused by read/finish and skipped by grep/files
    grep_timeout_s: float = 5.0  # ripgrep is killed past this deadline (a regex that runs long is cut)
    grep_max_lines: int = 40  # matching lines shown per grep
    grep_max_per_file: int = 8  # matching lines ripgrep reports per file
    grep_output_bytes: int = 256 * 1024  # ripgrep output read before it is killed
    files_max: int = 150  # paths shown per files()
    read_max_lines: int = 120  # lines shown per read
    line_max_chars: int = 300  # longer lines are cut in what the model sees (the reference is still to whole lines)


@dataclass
class ScoutConfig:
    """One scout run: who chooses the actions, under what budget and limits."""

    policy: str = "model"  # model | keyword (the non-neural control; no server, zero tokens)
    budget: int = 4  # rounds: one model response (up to max_actions actions) per round
    max_actions: int = 3  # actions executed per response; more are answered as ignored
    limits: ExecutorLimits = field(default_factory=ExecutorLimits)
    model: ModelConfig = field(default_factory=ModelConfig)
    compact_at: float = 0.8  # older results are dropped when the next request would pass this share of context

    def validate(self) -> "ScoutConfig":
        if self.policy not in POLICIES:
            raise ConfigError(f"policy={self.policy!r}: expected one of {', '.join(POLICIES)}")
        if self.budget < 1:
            raise ConfigError(f"budget={self.budget}: must be >= 1")
        if not 1 <= self.max_actions <= 3:
            raise ConfigError(f"max_actions={self.max_actions}: must lie in 1..3")
        if self.model.protocol not in ("auto", "native", "json"):
            raise ConfigError(f"model.protocol={self.model.protocol!r}: expected auto, native or json")
        return self

    def to_dict(self) -> dict:
        return asdict(self)
