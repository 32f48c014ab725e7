"""Scripts of the reference design's interface: `python -m scripts.ablate` (scripts/run.sh is plain bash)."""
