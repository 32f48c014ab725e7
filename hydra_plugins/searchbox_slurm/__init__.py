"""hydra/launcher=slurm: searchbox's Slurm launcher (a Hydra plugin must live in the hydra_plugins package)."""
