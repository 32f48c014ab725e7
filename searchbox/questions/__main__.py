"""`python -m searchbox.questions build|audit ...` (searchbox.questions.build)."""

import sys

from .build import main

sys.exit(main())
