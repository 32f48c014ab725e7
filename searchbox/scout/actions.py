"""The scout's action catalog (what the model may choose each round) and the `scout` tool itself, as catalog specs.

Both protocols, the prompt and the MCP server read these specs; the dataroom tools stay in
searchbox/tools/catalog.py, whose ToolSpec shape they share.
"""

from __future__ import annotations

from ..tools.catalog import ToolSpec, _obj

S = {"type": "string"}
LINE = {"type": "integer", "minimum": 1}

ACTIONS: tuple[ToolSpec, ...] = (
    ToolSpec("files", "scout", True, "List repository files matching a glob such as '*.py', 'src/' (everything under src) or 'src/**/*.ts'; src/ and lib/ come first "
             "(ignored and hidden files and files over 1 MB are skipped).",
             _obj({"glob": S}), "scout.executor:files"),
    ToolSpec("grep", "scout", True, "Search file contents with a regular expression (ripgrep, case-insensitive; at most 8 matching lines per file and 30 in all). "
             "Returns path:line: text. Optional glob limits the files.",
             _obj({"pattern": S, "glob": S}, ["pattern"]), "scout.executor:grep"),
    ToolSpec("read", "scout", True, "Show lines start..end of a file, numbered (at most 120 lines and about 8,000 characters per read).",
             _obj({"path": S, "start": LINE, "end": LINE}, ["path"]), "scout.executor:read"),
    ToolSpec("finish", "scout", True, "Answer with lines start..end of path. They must be lines you have read; the search then ends.",
             _obj({"path": S, "start": LINE, "end": LINE}, ["path", "start", "end"]), "scout.executor:finish"),
    ToolSpec("not_found", "scout", True, "End the search: the repository does not contain what was asked.", _obj({}), "scout.executor:not_found"),
)

BY_NAME = {spec.name: spec for spec in ACTIONS}

# The whole search as one tool (the MCP server exposes it; an agent could call it like any catalog tool).
SCOUT_TOOL = ToolSpec(
    "scout", "scout", False,
    "Find where something is implemented in the code repository. Returns verified references "
    "{path, start_line, end_line, sha256, content} to lines the searcher actually read, with a status "
    "(completed, abstained, budget_exhausted, model_error).",
    _obj({"query": S, "budget": {"type": "integer", "minimum": 1, "maximum": 32},
          "policy": {"enum": ["model", "keyword"]},
          "max_chars": {"type": "integer", "minimum": 1, "maximum": 100_000,
                        "description": "characters of cited source returned in all (default 6000)"}}, ["query"]),
    "scout.loop:scout",
)


def signature(spec: ToolSpec) -> str:
    """`grep(pattern, glob?)`, as the prompt shows an action."""
    props = spec.parameters.get("properties", {})
    required = set(spec.parameters.get("required", []))
    return f"{spec.name}({', '.join(k if k in required else k + '?' for k in props)})"
