"""The field's data sets in and out: importers (BEIR, BrowseComp-Plus, HotpotQA, MuSiQue, LongMemEval) that write a
dataroom folder, a questions.jsonl and a DATASET.md card; a BEIR exporter; and the check that every gold file a
question names is in its dataroom. `python -m searchbox.datasets import|export|check` (datasets/cli.py);
the question file's format: docs/datasets.md."""
