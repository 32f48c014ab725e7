"""The sweep stage: the Hydra job (one run per question per grid point), its plan and estimate, the sweep folder,
the list of unfinished runs, and the launch's tables."""
