"""MCP stdio server: `python -m searchbox.mcp --dataroom ZIP|DIR [--repo DIR]` exposes search_dataroom, answer_question and scout.

Built on the official `mcp` SDK (low-level Server, so the tools' JSON schemas come straight from
the catalogs: searchbox/tools/catalog.py for the dataroom tools, searchbox/scout/actions.py for
scout). The dataroom is extracted once, read-only, into a temporary directory. Every failure of a
call (bad arguments, a refused input, a backend that fails) comes back as an `isError` result or
an MCP error; the server itself keeps serving.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Optional

from jsonschema import Draft202012Validator

from . import __version__
from .config import RetrievalConfig
from .errors import SearchboxError, cli
from .paths import home
from .scout.actions import SCOUT_TOOL
from .scout.config import POLICIES, ScoutConfig
from .tools.catalog import BY_NAME, ToolSpec

INSTRUCTIONS = ("search_dataroom and answer_question search the documents of one dataroom; scout finds where something "
                "is implemented in one code repository and returns references to lines it read, with their SHA-256.")


def tool_specs() -> list[ToolSpec]:
    """The served tools, from their catalogs (the single source of their schemas)."""
    return [BY_NAME["search_dataroom"], BY_NAME["answer_question"], SCOUT_TOOL]


class ToolFailure(Exception):
    """A call that failed for a reason the client should read (returned as an isError result)."""


class Backend:
    """What the tools run against: the extracted dataroom and its retrieval, the repository, the scout settings."""

    def __init__(self, dataroom: Optional[str], repo: Optional[Path], retrieval: RetrievalConfig, scout: ScoutConfig,
                 endpoint: Optional[str], runs_dir: Path):
        from .dataroom import make_writable, open_workspace

        self.repo = Path(repo).resolve() if repo else None
        if self.repo is not None and not self.repo.is_dir():
            raise SearchboxError(f"--repo {repo}: not a directory")
        self.scout_cfg = scout.validate()
        self.endpoint = endpoint or os.environ.get("LLAMA_URL")
        self.runs_dir = runs_dir
        self._tmp = tempfile.mkdtemp(prefix="searchbox-mcp-")
        self._make_writable = make_writable
        try:
            self.workspace = open_workspace(Path(self._tmp) / "dataroom-run", dataroom)
        except BaseException:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        self.retrieval_cfg = retrieval
        self._retrieval = None
        self._server = None  # the embedded llama-server, started on the first scout call that needs a model
        self._lock = threading.Lock()  # one call at a time: retrieval and the server are not shared across threads
        self._validators = {s.name: Draft202012Validator(s.parameters) for s in tool_specs()}
        self._runs = 0

    @property
    def retrieval(self):
        if self._retrieval is None:
            from .retrieval import Retrieval

            self._retrieval = Retrieval(self.retrieval_cfg, self.workspace.dataroom)
        return self._retrieval

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        self._make_writable(Path(self._tmp))
        shutil.rmtree(self._tmp, ignore_errors=True)

    # ---- calls ----------------------------------------------------------------------------------
    def validate(self, name: str, arguments: Optional[dict]) -> dict:
        args = dict(arguments or {})
        error = next(iter(self._validators[name].iter_errors(args)), None)
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path)
            raise ToolFailure(f"invalid arguments for {name}: {(where + ': ') if where else ''}{error.message}")
        return args

    def call(self, name: str, arguments: Optional[dict]) -> dict:
        args = self.validate(name, arguments)
        with self._lock:
            if name == "search_dataroom":
                try:
                    return self.retrieval.search(args["query"], args.get("k", 8), args.get("paths"))
                except ValueError as exc:
                    raise ToolFailure(str(exc)) from None
            if name == "answer_question":
                return self.retrieval.answer(args["question"], args.get("k", 5))
            return self.scout(args)

    def scout(self, args: dict) -> dict:
        from .scout.loop import run_scout

        if self.repo is None:
            raise ToolFailure("no repository to scout: start the server with --repo DIR")
        cfg = ScoutConfig(**{**self.scout_cfg.__dict__, "budget": args.get("budget", self.scout_cfg.budget),
                             "policy": args.get("policy", self.scout_cfg.policy)})
        self._runs += 1
        run_dir = self.runs_dir / f"scout-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{self._runs}"
        result = run_scout(cfg, args["query"], self.repo, run_dir, self._endpoint(cfg))
        return result.to_dict()

    def _endpoint(self, cfg: ScoutConfig) -> Optional[str]:
        if cfg.policy != "model":
            return None
        if self.endpoint:
            return self.endpoint
        if self._server is None:
            from .llama import LlamaServer

            self._server = LlamaServer.from_config(cfg.model).start()
        return self._server.url


def _result(payload: Any, is_error: bool = False):
    import mcp.types as types

    if is_error:
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(payload))], is_error=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False, default=str))],
                                structured_content=payload)


def build_server(backend: Backend):
    """The low-level MCP Server with list_tools/call_tool handlers over the backend."""
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    specs = {s.name: s for s in tool_specs()}

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name=s.name, description=s.description, input_schema=s.parameters)
                                            for s in specs.values()])

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in specs:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name!r}; tools: {', '.join(specs)}")
        try:
            payload = await anyio.to_thread.run_sync(backend.call, params.name, params.arguments)
        except (ToolFailure, SearchboxError) as exc:
            return _result(f"{params.name}: {exc}", is_error=True)
        except Exception as exc:  # a bug must cost one call, never the server
            traceback.print_exc(file=sys.stderr)
            return _result(f"{params.name}: internal error: {type(exc).__name__}: {exc}", is_error=True)
        return _result(payload)

    return Server("searchbox", version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(backend: Backend) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(backend)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


@cli
def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.mcp", description="MCP stdio server for dataroom search and repository scouting.")
    parser.add_argument("--dataroom", required=True, help="zip or folder to search (extracted once, read-only)")
    parser.add_argument("--repo", type=Path, default=None, help="code repository for the scout tool")
    parser.add_argument("--retriever", choices=["dense", "bm25", "hybrid"], default="dense", help="how search_dataroom ranks chunks")
    parser.add_argument("--device", default="cpu", help="embedder device: cpu | cuda | auto")
    parser.add_argument("--endpoint", default=None, help="model endpoint for scout (default: $LLAMA_URL, else the embedded llama-server)")
    parser.add_argument("--model", default=os.environ.get("MODEL_ID"), help="model id for scout requests (default: $MODEL_ID)")
    parser.add_argument("--policy", choices=POLICIES, default="model", help="scout's default policy (a call may override it)")
    parser.add_argument("--budget", type=int, default=4, help="scout's default rounds (a call may override it)")
    parser.add_argument("--runs", type=Path, default=None, help="where scout run directories go (default: $SEARCHBOX_HOME/mcp-runs)")
    args = parser.parse_args(argv)
    retrieval = RetrievalConfig(retriever=args.retriever, device=args.device)
    scout = ScoutConfig(policy=args.policy, budget=args.budget)
    scout.model.model = args.model
    backend = Backend(args.dataroom, args.repo, retrieval, scout, args.endpoint, args.runs or home() / "mcp-runs")
    import anyio

    try:
        anyio.run(serve, backend)
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(Exception):
            backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
