"""`python -m searchbox.run QUESTION [DATAROOM]`: one run (searchbox.run.runner)."""

import sys

from .cli import main

sys.exit(main())
