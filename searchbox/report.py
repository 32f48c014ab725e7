"""`python -m searchbox.report`: figures and summary.md from a sweep's tables (searchbox.analysis.report)."""

from searchbox.analysis.report import main

if __name__ == "__main__":
    from .errors import exit_process

    exit_process(main)  # errors.exit_process: no native teardown abort after the work is written
