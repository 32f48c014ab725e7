"""A run's record: the typed rows and run_meta.json the recorder alone writes, the trajectory that says two runs
ran the same, and collect, which reads run folders back into the sweep's tables."""
