"""The web app: submit jobs, watch runs live, browse sweeps (`python -m searchbox.serve`)."""
