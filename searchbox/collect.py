"""`python -m searchbox.collect`: a sweep folder's runs into runs/turns/tool_calls parquet (searchbox.record.collect)."""

import sys

from searchbox.record.collect import main

if __name__ == "__main__":
    sys.exit(main())
