"""Analysis of sweep logs: tidy frames, conditions, statistics over questions and figures, all read from the parquet tables."""

from .compare import EmptyArm, PooledArm, comparisons, paired_comparison
from .figures import FIGURES, save
from .frames import GRADERS, LENIENT, Frames, accuracy_table, cells, conditions, headline_grader, label, load, search_style_table, time_split, tokens_per_turn, tool_usage
from .stats import bootstrap_ci, cluster_bootstrap, mcnemar_exact, paired_bootstrap

__all__ = ["FIGURES", "GRADERS", "LENIENT", "EmptyArm", "Frames", "PooledArm", "accuracy_table", "bootstrap_ci", "cells", "cluster_bootstrap",
           "comparisons", "conditions", "headline_grader", "label", "load", "mcnemar_exact", "paired_bootstrap", "paired_comparison", "save", "search_style_table",
           "time_split", "tokens_per_turn", "tool_usage"]
