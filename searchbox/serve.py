"""`python -m searchbox.serve`: the web app and its scheduler (searchbox.web.serve)."""

import sys

from searchbox.web.serve import main

if __name__ == "__main__":
    sys.exit(main())
