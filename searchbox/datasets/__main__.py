"""`python -m searchbox.datasets import|export|check ...` (searchbox.datasets.cli)."""

import sys

from .cli import main

sys.exit(main())
