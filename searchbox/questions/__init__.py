"""Question sets: build the packaged set from the corpus's front matter, and audit any set (gold in its gold files,
not in the question, multi-hop not answerable from one document)."""
