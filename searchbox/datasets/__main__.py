"""`python -m searchbox.datasets import|export|check ...` (searchbox.datasets.cli)."""

from .cli import main
from ..errors import exit_process

exit_process(main)  # errors.exit_process: no native teardown abort after the work is written
