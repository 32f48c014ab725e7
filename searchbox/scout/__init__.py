"""Repository search with verified references (SPEC §10): a model or the keyword control, a bounded executor, an evaluator."""
