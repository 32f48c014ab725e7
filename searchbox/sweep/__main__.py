"""`python -m searchbox.sweep -m AXIS=a,b ...`: the Hydra sweep (searchbox.sweep.job)."""

import sys

from .job import main

sys.exit(main())
