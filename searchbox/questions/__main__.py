"""`python -m searchbox.questions build|audit ...` (searchbox.questions.build)."""

from .build import main
from ..errors import exit_process

exit_process(main)  # errors.exit_process: no native teardown abort after the work is written
