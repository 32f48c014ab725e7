"""The corpus stage: a dataroom opened safely (zip or folder), distractors mixed in, markup read, and the one way
the harness touches files (safefs: no link or special file followed)."""
