"""What observing a bash call's file opens costs (issue 29.2): the bash tool's box with and without strace around it.

    python benchmarks/opens_overhead.py [REPEATS] [results/benchmarks/opens_overhead.json]

Each command runs REPEATS times traced and REPEATS times not, interleaved (a machine's load changes slowly, so both
sides share it), in the box the harness gives bash by default (bwrap, the 1 GiB work/ quota tmpfs) over a dataroom of
500 files. Each command's figure is its median traced call less its median untraced one.
Writes the JSON and a .md beside it, with the machine's load (1-minute load average and cores) before and after.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from searchbox.config import HarnessConfig
from searchbox.tools import opens, sandbox

COMMANDS = {
    "echo": "echo hi",
    "cat one file": "cat dataroom/d/f0.md",
    "grep -rn the dataroom": "grep -rn needle dataroom | head -5",
    "python3 -c 'import json'": "python3 -c 'import json'",
}


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "results/benchmarks/opens_overhead.json")
    if not sandbox.bwrap_works() or opens.unavailable():
        print(f"needs bubblewrap and strace: {sandbox.probe_failure() or opens.unavailable()}", file=sys.stderr)
        return 1
    load_before = os.getloadavg()[0]
    root = Path(tempfile.mkdtemp(prefix="searchbox-opens-bench-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    work = root / "work"
    (work / "dataroom" / "d").mkdir(parents=True)
    for i in range(500):
        (work / "dataroom" / "d" / f"f{i}.md").write_text(f"# File {i}\n\n" + "Some text of the dataroom, line after line.\n" * 40
                                                          + ("the needle\n" if i % 100 == 0 else ""))
    limits = sandbox.limits_for(HarnessConfig())
    rows = []
    try:
        for name, command in COMMANDS.items():
            times: dict[bool, list[float]] = {True: [], False: []}
            for i in range(repeats * 2):
                traced = i % 2 == 0
                t0 = time.monotonic()
                res = sandbox.run_shell(command, work, [work / "dataroom"], "bwrap", 30, 1 << 20, limits, observe_opens=traced)
                times[traced].append((time.monotonic() - t0) * 1000)
                assert res.exit_code == 0 and (res.opened is not None) is traced, (command, res)
            rows.append({"command": name, "untraced_ms": round(statistics.median(times[False]), 1),
                         "traced_ms": round(statistics.median(times[True]), 1),
                         "overhead_ms": round(statistics.median(times[True]) - statistics.median(times[False]), 1)})
    finally:
        from searchbox.corpus.dataroom import make_writable

        make_writable(root)
        shutil.rmtree(root, ignore_errors=True)
    result = {"repeats": repeats, "commands": rows, "strace": opens.tracer_argv("LOG")[1:], "machine": platform.machine(), "cores": os.cpu_count(),
              "load_1min_before": round(load_before, 2), "load_1min_after": round(os.getloadavg()[0], 2),
              "when": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "load": "shared machine: other agents' builds and tests ran meanwhile (the load averages above); "
                      "both sides interleaved, so they share it"}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    lines = ["# What observing a bash call's opens costs (issue 29.2)", "",
             f"Written by `benchmarks/opens_overhead.py` ({repeats} calls a side, interleaved), {result['when']}, on {os.cpu_count()} "
             f"cores with a 1-minute load average of {result['load_1min_before']} before and {result['load_1min_after']} after "
             "(a machine shared with other agents' builds and tests: upper bounds for a quiet one). The box is the bash tool's "
             "default (bwrap, the work/ quota tmpfs), over a dataroom of 500 files; the tracer is "
             f"`strace {' '.join(result['strace'])}`.", "",
             "| command | untraced (median ms) | traced (median ms) | overhead (ms) |", "|---|---:|---:|---:|"]
    lines += [f"| `{r['command']}` | {r['untraced_ms']} | {r['traced_ms']} | {r['overhead_ms']} |" for r in rows]
    lines += [""]
    out.with_suffix(".md").write_text("\n".join(lines))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
