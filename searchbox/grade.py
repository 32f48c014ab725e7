"""`python -m searchbox.grade`: the regrade CLI (searchbox.grading.cli)."""

from searchbox.grading.cli import main

if __name__ == "__main__":
    from .errors import exit_process

    exit_process(main)  # errors.exit_process: no native teardown abort after the work is written
