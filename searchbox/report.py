"""`python -m searchbox.report`: figures and summary.md from a sweep's tables (searchbox.analysis.report)."""

import sys

from searchbox.analysis.report import main

if __name__ == "__main__":
    sys.exit(main())
