"""One run: its identity (what the key hashes), the runner that opens the dataroom, starts the model and hands
the run to its harness, its resume, and the single-run CLI (`python -m searchbox.run`)."""
