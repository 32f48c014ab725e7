"""`python -m searchbox.power`: the smallest difference a sweep's questions can detect (searchbox.analysis.power)."""

import sys

from searchbox.analysis.power import main

if __name__ == "__main__":
    sys.exit(main())
