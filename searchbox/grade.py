"""`python -m searchbox.grade`: the regrade CLI (searchbox.grading.cli)."""

import sys

from searchbox.grading.cli import main

if __name__ == "__main__":
    sys.exit(main())
