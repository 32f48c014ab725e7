"""A persistent, mmap-able index of a folder or zip of text and code: build, delta refresh, compaction, exact/ANN/BM25 search."""
