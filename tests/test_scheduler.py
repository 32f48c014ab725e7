"""`python tests/test_scheduler.py` runs the web scheduler's tests, as the reference design's command does.

The tests live with the web package they test (tests/web/test_scheduler.py); this file only starts them, so
pytest collects nothing here.
"""

if __name__ == "__main__":
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    test = here / "web" / "test_scheduler.py"
    raise SystemExit(subprocess.call([sys.executable, "-m", "pytest", "-q", str(test), *sys.argv[1:]], cwd=here.parent))
