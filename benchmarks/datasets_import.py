"""Peak memory and time of `datasets import beir` on a generated N-document corpus.jsonl (streaming check).

    python benchmarks/datasets_import.py 100000 results/benchmarks/datasets_import.json
"""

from __future__ import annotations

import json
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    n, out = int(sys.argv[1]), Path(sys.argv[2])
    rng = random.Random(0)
    words = [f"w{i}" for i in range(5000)]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "beir"
        (src / "qrels").mkdir(parents=True)
        with open(src / "corpus.jsonl", "w") as fh:
            for i in range(n):
                fh.write(json.dumps({"_id": f"d{i}", "title": f"Doc {i}", "text": " ".join(rng.choices(words, k=120))}) + "\n")
        (src / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(100)))
        (src / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i * 7}\t1\n" for i in range(100)))
        size = (src / "corpus.jsonl").stat().st_size
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "searchbox.datasets", "import", "beir", str(src), "--out", str(Path(tmp) / "out")], check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.monotonic() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = {"documents": n, "corpus_bytes": size, "wall_s": round(wall, 1), "peak_rss_mib": round(peak_kib / 1024, 1),
              "machine": platform.machine(), "python": platform.python_version(),
              "load": "shared machine: 2 cores and 24 GiB used by 8 agents at once; wall time is not a clean measurement"}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
