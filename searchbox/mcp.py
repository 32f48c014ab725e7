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
from .scout.config import POLICIES, ScoutConfig, loopback_only
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
        from .corpus.dataroom import make_writable, open_workspace

        self.repo = Path(repo).resolve() if repo else None
        if self.repo is not None and not self.repo.is_dir():
            raise SearchboxError(f"--repo {repo}: not a directory")
        self.scout_cfg = scout.validate()
        self.endpoint = endpoint or os.environ.get("LLAMA_URL")
        if self.endpoint:  # scout sends repository code to the model: only to one on this machine
            loopback_only(self.endpoint, "--endpoint" if endpoint else "$LLAMA_URL")
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
                             "policy": args.get("policy", self.scout_cfg.policy),
                             "max_chars": args.get("max_chars", self.scout_cfg.max_chars)})
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
            from .model.llama import LlamaServer

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


MAX_LINE = 16 * 1024**2  # longest request line read (a longer one is answered with an error and skipped)
DRAIN_S = 300.0  # how long requests in flight may still finish once the client has closed stdin


def top_level_id(text: str) -> Any:
    """The `id` of a JSON object too deeply nested for the parser (its other members skipped without recursion), or None."""
    depth, i, n, key, expect_key = 0, 0, len(text), None, False
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if depth == 1 and expect_key:
                key, expect_key = text[i:j + 1], False
            elif depth == 1 and key == '"id"':
                with contextlib.suppress(ValueError):
                    return json.loads(text[i:j + 1])
            i = j + 1
            continue
        if c in "[{":
            depth += 1
            expect_key = depth == 1 and c == "{"
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 1:
            key, expect_key = None, True
        elif depth == 1 and key == '"id"' and (c == "-" or c.isdigit()):
            j = i
            while j < n and (text[j] == "-" or text[j].isdigit()):
                j += 1
            return int(text[i:j])
        i += 1
    return None


def log(text: str) -> None:
    """One line about a request or its response, on stderr (stdout is the wire)."""
    print(f"searchbox.mcp: {text}".encode("utf-8", errors="backslashreplace").decode("utf-8"), file=sys.stderr, flush=True)


class Wire:
    """The stdio transport's two ends as the SDK sees them, in front of the process's pipes.

    Every line is checked before the SDK reads it: a line the SDK cannot take (not JSON, not UTF-8, a lone
    surrogate, not a JSON-RPC message, too long) would be dropped by it without a word, so it is answered here
    with a JSON-RPC error for its id. Every request is logged when it arrives and again when its response leaves.
    """

    def __init__(self, infile, outfile):
        import anyio

        self._in, self._out = infile, outfile  # binary files: the pipes the client reads and writes
        self._lock = anyio.Lock()
        self._pending: dict[Any, tuple[str, float]] = {}  # request id -> (what it asked, when)

    # ---- in ------------------------------------------------------------------------------------
    def __aiter__(self):
        return self._lines()

    async def _read(self, size: int) -> bytes:
        import anyio

        # abandon_on_cancel: at shutdown the thread may stay blocked on the pipe; the server must not wait for it
        return await anyio.to_thread.run_sync(self._in.readline, size, abandon_on_cancel=True)

    async def _lines(self):
        import anyio

        while True:
            line = await self._read(MAX_LINE + 1)
            if not line:  # the client closed stdin: answer what it asked before the server stops
                with anyio.move_on_after(DRAIN_S):
                    while self._pending:
                        await anyio.sleep(0.05)
                if self._pending:
                    log(f"stdin closed; stopping with {len(self._pending)} request(s) unanswered after {DRAIN_S:g} s")
                return
            if len(line) > MAX_LINE:
                while line and not line.endswith(b"\n"):  # skip the rest of it
                    line = await self._read(1 << 20)
                await self._reply_error(None, -32700, f"parse error: a request line over {MAX_LINE} bytes")
                continue
            if not line.strip():
                continue
            text = await self._admit(line)
            if text is not None:
                yield text

    async def _admit(self, line: bytes) -> Optional[str]:
        """The line for the SDK, or None once it was answered (or, a notification, dropped and logged)."""
        import mcp_types as types

        try:
            text, utf8 = line.decode("utf-8"), True
        except UnicodeDecodeError:
            text, utf8 = line.decode("utf-8", errors="replace"), False
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:
            rid = top_level_id(text)  # a request too deep for the parser still names its id: answer that id
            if rid is not None:
                self._pending[rid] = ("?", time.monotonic())
            await self._reply_error(rid, types.PARSE_ERROR, f"parse error: {str(exc)[:200] or 'nested too deep'}")
            return None
        if not isinstance(obj, dict):
            await self._reply_error(None, types.INVALID_REQUEST, "invalid request: one JSON-RPC object per line (batches are not supported)")
            return None
        rid = obj.get("id")
        rid = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
        problem = None if utf8 else (types.PARSE_ERROR, "parse error: the request is not valid UTF-8")
        if problem is None:
            try:
                json.dumps(obj, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                problem = (types.INVALID_PARAMS, "invalid params: a string holds a lone surrogate (such as \\ud83d, half an emoji), not valid Unicode")
            except (RecursionError, ValueError):
                problem = (types.INVALID_REQUEST, "invalid request: nested too deep")
        if problem is None:
            try:
                types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            except Exception as exc:  # pydantic's ValidationError: the first line after its title says what
                detail = " ".join(str(exc).splitlines()[1:3]).strip()[:300]
                problem = (types.INVALID_REQUEST, f"invalid request: {detail or 'not a JSON-RPC 2.0 message'}")
        method = obj.get("method") if isinstance(obj.get("method"), str) else None
        params = obj.get("params") if isinstance(obj.get("params"), dict) else {}
        what = f"{method or '?'}" + (f" {params['name']}" if method == "tools/call" and isinstance(params.get("name"), str) else "")
        if problem is not None:
            if method is not None and "id" not in obj:  # a notification gets no response, by JSON-RPC
                log(f"dropped notification {what[:100]}: {problem[1]}")
                return None
            self._pending[rid] = (what[:100], time.monotonic())
            await self._reply_error(rid, *problem)
            return None
        if method is not None and "id" in obj:
            self._pending[rid] = (what[:100], time.monotonic())
            log(f"request {rid!r}: {what[:100]}")
        elif method == "notifications/cancelled":  # the client gave up on it: no response is due
            self._pending.pop(params.get("requestId"), None)
        return text

    # ---- out -----------------------------------------------------------------------------------
    async def _reply_error(self, rid, code: int, message: str) -> None:
        await self.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}) + "\n")
        await self.flush()

    async def write(self, text: str) -> None:
        import anyio

        async with self._lock:
            data = text.encode("utf-8", errors="backslashreplace")  # a lone surrogate leaves as its JSON escape
            await anyio.to_thread.run_sync(self._out.write, data)
        self._logged(text)

    async def flush(self) -> None:
        import anyio

        async with self._lock:
            await anyio.to_thread.run_sync(self._out.flush)

    def _logged(self, text: str) -> None:
        try:
            obj = json.loads(text)
        except ValueError:
            return
        if not isinstance(obj, dict) or "method" in obj or not ("result" in obj or "error" in obj):
            return
        what, t0 = self._pending.pop(obj.get("id"), ("?", time.monotonic()))
        ms = (time.monotonic() - t0) * 1000
        if "error" in obj:
            err = obj["error"] if isinstance(obj["error"], dict) else {}
            log(f"response {obj.get('id')!r}: {what}: error {err.get('code')}: {str(err.get('message'))[:300]} ({ms:.0f} ms)")
        elif isinstance(obj["result"], dict) and obj["result"].get("isError"):
            content = obj["result"].get("content") or [{}]
            log(f"response {obj.get('id')!r}: {what}: tool error: {str(content[0].get('text'))[:300]} ({ms:.0f} ms)")
        else:
            log(f"response {obj.get('id')!r}: {what}: ok ({ms:.0f} ms)")


@contextlib.contextmanager
def claimed_stdio():
    """The wire's own copies of fds 0 and 1; while serving, fd 0 reads /dev/null and fd 1 writes to stderr, so
    children (llama-server, ripgrep) and stray prints never read or tear the protocol stream."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        # closefd=False: a worker thread may still block reading the pipe when serving ends
        yield os.fdopen(wire_in, "rb", buffering=0, closefd=False), os.fdopen(wire_out, "wb", closefd=False)
    finally:
        with contextlib.suppress(OSError):
            os.dup2(wire_in, 0)
            os.dup2(wire_out, 1)


async def serve(backend: Backend) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(backend)
    with claimed_stdio() as (raw_in, raw_out):
        wire = Wire(raw_in, raw_out)
        async with stdio_server(stdin=wire, stdout=wire) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


@cli
def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.mcp", description="MCP stdio server for dataroom search and repository scouting.")
    parser.add_argument("--dataroom", required=True, help="zip or folder to search (extracted once, read-only)")
    parser.add_argument("--repo", type=Path, default=None, help="code repository for the scout tool")
    parser.add_argument("--retriever", choices=["dense", "bm25", "hybrid"], default="dense", help="how search_dataroom ranks chunks")
    parser.add_argument("--device", default="cpu", help="embedder device: cpu | cuda | auto")
    parser.add_argument("--endpoint", default=None, help="model endpoint for scout, on this machine (loopback only; "
                        "default: $LLAMA_URL, else the embedded llama-server)")
    parser.add_argument("--model", default=os.environ.get("MODEL_ID"), help="model id for scout requests (default: $MODEL_ID)")
    parser.add_argument("--policy", choices=POLICIES, default="model", help="scout's default policy (a call may override it)")
    parser.add_argument("--budget", type=int, default=ScoutConfig.budget, help="scout's default rounds (a call may override it)")
    parser.add_argument("--max-chars", type=int, default=ScoutConfig.max_chars,
                        help="scout's default characters of cited source per search (a call may override it with max_chars)")
    parser.add_argument("--timeout", type=float, default=ScoutConfig.timeout_s, help="scout's deadline per search in seconds")
    parser.add_argument("--runs", type=Path, default=None, help="where scout run directories go (default: $SEARCHBOX_HOME/mcp-runs)")
    args = parser.parse_args(argv)
    retrieval = RetrievalConfig(retriever=args.retriever, device=args.device)
    scout = ScoutConfig(policy=args.policy, budget=args.budget, max_chars=args.max_chars, timeout_s=args.timeout)
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
