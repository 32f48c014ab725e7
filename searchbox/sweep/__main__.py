"""`python -m searchbox.sweep -m AXIS=a,b ...`: the Hydra sweep (searchbox.sweep.job)."""

from ..errors import exit_process
from .job import main

exit_process(main)  # errors.exit_process: no native teardown abort after the work is written
