"""The tool catalog: the single source of truth for every tool's name, tier, default, schema and description.

Registration in the agent, argument validation, `python -m searchbox tools`, the web app and the docs all
read it, and the named selections (`tools=high`, `tools=grep_only`, ...) are one table here (NAMED_TIERS).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable

from ..errors import ConfigError

TIERS = ("builtin", "high", "low")


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the model sees it, plus where its implementation lives."""

    name: str
    tier: str  # builtin (on unless a selection picks built-ins itself) | high | low
    default: bool  # on when no selection is given
    description: str
    parameters: dict[str, Any]
    impl: str  # "module:function" under searchbox.tools, imported on first call

    def schema(self, limits: bool = False) -> dict:
        """The tool as a model sees it: the parameters without the validation limits (what a capable model is asked
        stays as it was before the limits existed). limits=True keeps them (validation, the JSON protocol's grammar)."""
        return {"name": self.name, "description": self.description, "parameters": with_limits(self.parameters, limits)}


def _obj(props: dict, required: Iterable[str] = ()) -> dict:
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


# ---- what a model may send --------------------------------------------------------------------
# Every argument is checked against these before any tool runs (Toolset.call, tools/validate.py): the
# schema's types and bounds, plus the global rules below. They are generous enough for a capable model
# (a bash script may be a long heredoc; write/edit content much larger) and tight enough that nothing
# the model sends can stop the harness. The constrained-JSON grammar derives its own bounds from these.
MAX_DEPTH = 8  # nesting of an arguments object (the deepest schema, an object of arrays of strings, is 3)
MAX_ARGUMENT_CHARS = 8 * 1024**2  # the arguments text of one call, as sent (JSON escapes included)
PATH_CHARS = 4096  # PATH_MAX
COMMAND_CHARS = 100_000  # one bash command: a script of a few thousand lines (exec takes 128 KiB per argument)
PATTERN_CHARS = 10_000  # a regular expression
GLOB_CHARS = 4096  # a glob (fnmatch is quadratic in unclosed brackets)
QUERY_CHARS = 10_000  # a search query or question
CONTENT_CHARS = 1_000_000  # write content, edit old/new
TEXT_CHARS = 100_000  # one text of a list (embed, rerank, similarity...)
LIST_ITEMS = 1_000  # texts, documents, labels or paths in one call
LINE_MAX = 1_000_000_000  # line offsets and counts
# Global rules (every string, number and nesting level of the arguments, whatever the tool): finite numbers only,
# integers are integers (2.0 is not), strings are valid Unicode (no lone surrogate) and hold no NUL.


LIMITS_KEY = "x-searchbox-limits"  # names the keywords of a schema node that are validation limits only


def _limit(node: dict, **limits: Any) -> dict:
    """A schema node with validation limits: enforced on what the model sends, never shown to it (ToolSpec.schema)."""
    return {**node, **limits, LIMITS_KEY: sorted(limits)}


def with_limits(node: Any, keep: bool) -> Any:
    """A copy of a schema without its limits markers; keep=False also drops the limits they name."""
    if isinstance(node, list):
        return [with_limits(v, keep) for v in node]
    if not isinstance(node, dict):
        return node
    drop = set() if keep else set(node.get(LIMITS_KEY, ()))
    return {k: with_limits(v, keep) for k, v in node.items() if k != LIMITS_KEY and k not in drop}


def _str(max_chars: int) -> dict:
    return _limit({"type": "string"}, maxLength=max_chars)


def _strs(max_chars: int = TEXT_CHARS) -> dict:
    return _limit({"type": "array", "items": _str(max_chars)}, maxItems=LIST_ITEMS)


def _count(maximum: int) -> dict:
    return _limit({"type": "integer", "minimum": 1}, maximum=maximum)


PATH = _str(PATH_CHARS)
QUERY = _str(QUERY_CHARS)
CONTENT = _str(CONTENT_CHARS)
LINE = _count(LINE_MAX)
STRS = _strs()

CATALOG: tuple[ToolSpec, ...] = (
    # built-ins: confined to the run's work/ directory; on unless a selection picks built-ins itself
    ToolSpec("read", "builtin", True, "Read a text file (relative to the working directory), with line numbers. Use offset/limit for long files.",
             _obj({"path": PATH, "offset": LINE, "limit": LINE}, ["path"]), "builtins:read"),
    ToolSpec("bash", "builtin", True, "Run a bash command in the working directory (no network, time-limited). dataroom/ is read-only.",
             _obj({"command": _str(COMMAND_CHARS), "timeout": _limit({"type": "number", "minimum": 1}, maximum=3600)}, ["command"]),
             "builtins:bash"),
    ToolSpec("grep", "builtin", True, "Search file contents with a regular expression (ripgrep). Returns path:line:text.",
             _obj({"pattern": _str(PATTERN_CHARS), "path": PATH, "glob": _str(GLOB_CHARS), "ignore_case": {"type": "boolean"}},
                  ["pattern"]), "builtins:grep"),
    ToolSpec("find", "builtin", True, "List files whose path matches a glob pattern such as '*.md' or 'docs/**/*.txt'.",
             _obj({"pattern": _str(GLOB_CHARS), "path": PATH}, ["pattern"]), "builtins:find"),
    ToolSpec("ls", "builtin", True, "List a directory's entries with sizes.", _obj({"path": PATH}), "builtins:ls"),
    ToolSpec("write", "builtin", True, "Write a file in the working directory (not inside dataroom/), replacing it if present.",
             _obj({"path": PATH, "content": CONTENT}, ["path", "content"]), "builtins:write"),
    ToolSpec("edit", "builtin", True, "Replace an exact string in a file of the working directory.",
             _obj({"path": PATH, "old": CONTENT, "new": CONTENT, "replace_all": {"type": "boolean"}}, ["path", "old", "new"]),
             "builtins:edit"),
    # high tier: dataroom-aware, one call does the job
    ToolSpec("search_dataroom", "high", True,
             "Semantic search over the dataroom (or only the given files/folders). Returns the best chunks with path, score and text.",
             _obj({"query": QUERY, "k": {"type": "integer", "minimum": 1, "maximum": 50}, "paths": _strs(PATH_CHARS)}, ["query"]),
             "retrieval_tools:search_dataroom"),
    ToolSpec("answer_question", "high", True,
             "Find the passages of the dataroom that best answer a question: wide dense retrieval, then cross-encoder reranking.",
             _obj({"question": QUERY, "k": {"type": "integer", "minimum": 1, "maximum": 20}}, ["question"]), "retrieval_tools:answer_question"),
    # low tier: stateless primitives over data the caller passes in
    ToolSpec("embed_texts", "low", False,
             "Embed texts and append one JSON line per text to a file in the working directory. Returns the path, count and dimension, not vectors.",
             _obj({"texts": STRS, "role": {"enum": ["query", "passage"]}, "out": PATH}, ["texts"]), "retrieval_tools:embed_texts"),
    ToolSpec("rerank", "low", False, "Score documents against a query with a cross-encoder; best first.",
             _obj({"query": QUERY, "documents": STRS, "top_n": _count(LIST_ITEMS)},
                  ["query", "documents"]), "retrieval_tools:rerank"),
    ToolSpec("similarity", "low", False,
             "Cosine similarity: pairwise when a and b have equal length, else a matrix (a as queries, b as passages).",
             _obj({"a": STRS, "b": STRS}, ["a", "b"]), "retrieval_tools:similarity"),
    ToolSpec("classify", "low", False, "Assign each text the nearest label by embedding similarity.",
             _obj({"texts": STRS, "labels": STRS}, ["texts", "labels"]), "retrieval_tools:classify"),
    ToolSpec("cluster", "low", False, "Group near-duplicate texts (greedy single pass over cosine similarity).",
             _obj({"texts": STRS, "threshold": {"type": "number", "minimum": 0, "maximum": 1}}, ["texts"]), "retrieval_tools:cluster"),
    ToolSpec("select_diverse", "low", False, "Pick k mutually dissimilar texts (greedy max-min diversity).",
             _obj({"texts": STRS, "k": _count(LIST_ITEMS)}, ["texts"]), "retrieval_tools:select_diverse"),
)

BY_NAME = {spec.name: spec for spec in CATALOG}
BUILTINS = tuple(s.name for s in CATALOG if s.tier == "builtin")


@dataclass(frozen=True)
class NamedTier:
    """A name `tools=` accepts for a set of tools.

    isolated=False: the tier adds its dataroom tools to the built-ins (today's `high`, `low`, `all`, `none`).
    isolated=True: the tier names its built-ins too, so a selection holding it gets no other built-in
    (the paper's isolated retrieval types: one way to find text, plus what it takes to read and answer).
    """

    name: str
    members: tuple[str, ...]
    isolated: bool
    description: str


def _tier_tools(*tiers: str) -> tuple[str, ...]:
    return tuple(s.name for s in CATALOG if s.tier in tiers)


# The one table of named selections; select(), describe(), the web app and the docs read it.
NAMED_TIERS: tuple[NamedTier, ...] = (
    NamedTier("none", (), False, "built-ins only: the grep/read/bash baseline"),
    NamedTier("high", _tier_tools("high"), False, "built-ins + dataroom-aware tools (one call does the job)"),
    NamedTier("low", _tier_tools("low"), False, "built-ins + stateless embedding primitives over data the caller passes"),
    NamedTier("all", _tier_tools("high", "low"), False, "built-ins + every dataroom tool"),
    NamedTier("grep_only", ("grep", "read", "ls", "write", "edit"), True,
              "lexical retrieval only: grep, read, ls, and write/edit for the answer (no bash, no find, no dense tool)"),
    NamedTier("vector_only", ("search_dataroom", "read", "ls", "write", "edit"), True,
              "dense retrieval only: search_dataroom, read, ls, and write/edit for the answer (no grep, no bash, no find)"),
)
TIER_BY_NAME = {t.name: t for t in NAMED_TIERS}


def select(selection: Any) -> list[ToolSpec]:
    """Resolve a `tools=` value to specs in catalog order; unknown names raise ConfigError.

    None = catalog defaults. Otherwise a tier name, a tool name, or a list (or comma-separated string)
    of them, united. The built-ins come along implicitly unless the selection picks built-ins itself:
    by naming an isolated tier (grep_only, vector_only) or any built-in tool. So `high` and
    `rerank,similarity` keep every built-in, while `grep_only` and `grep,read,write` are exact.
    """
    if selection is None:
        return [s for s in CATALOG if s.tier == "builtin" or s.default]
    if isinstance(selection, str):
        selection = [p.strip() for p in selection.split(",") if p.strip()]
    chosen: set[str] = set()
    explicit_builtins = False
    for item in map(str, selection):
        if item in TIER_BY_NAME:
            tier = TIER_BY_NAME[item]
            chosen.update(tier.members)
            explicit_builtins |= tier.isolated
        elif item in BY_NAME:
            chosen.add(item)
            explicit_builtins |= BY_NAME[item].tier == "builtin"
        else:
            raise ConfigError(f"unknown tool {item!r}; known: {', '.join(TIER_BY_NAME)}, {', '.join(BY_NAME)}")
    if not explicit_builtins:
        chosen.update(BUILTINS)
    return [s for s in CATALOG if s.name in chosen]


def offered(cfg: Any) -> list[ToolSpec]:
    """The tools a run's config offers, as the model sees them: select(cfg.tools), with search_dataroom's k fixed by
    retrieval.search_k (the argument dropped, the count said in the description). Every place that keys, sends or
    runs a run's tools reads this, so the key, the prompt and the toolset agree."""
    specs = select(cfg.tools)
    k = cfg.retrieval.search_k
    if k is None:
        return specs
    out = []
    for spec in specs:
        if spec.name == "search_dataroom":
            params = {**spec.parameters, "properties": {n: v for n, v in spec.parameters["properties"].items() if n != "k"}}
            spec = replace(spec, parameters=params, description=spec.description.replace(
                "Returns the best chunks", f"Returns the {k} best chunks"))
        out.append(spec)
    return out


def tier_members(name: str) -> list[str]:
    """The tool names a named tier selects (for the web app's toggles and the docs)."""
    if name not in TIER_BY_NAME:
        raise ConfigError(f"unknown tier {name!r}; known: {', '.join(TIER_BY_NAME)}")
    return [s.name for s in select(name)]


def describe() -> str:
    """The catalog and the named tiers as markdown tables (for --help and the README)."""
    rows = ["| tool | tier | default | arguments | description |", "|---|---|---|---|---|"]
    for s in CATALOG:
        req = set(s.parameters.get("required", []))
        args = ", ".join(f"{k}{'' if k in req else '?'}" for k in s.parameters["properties"])
        rows.append(f"| `{s.name}` | {s.tier} | {'yes' if s.default else 'no'} | {args} | {s.description} |")
    rows += ["", "| `tools=` | selects | meaning |", "|---|---|---|"]
    for t in NAMED_TIERS:
        rows.append(f"| `{t.name}` | {', '.join(tier_members(t.name))} | {t.description} |")
    return "\n".join(rows)
