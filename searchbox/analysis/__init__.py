"""Analysis of sweep logs: tidy frames, conditions, statistics over questions and figures, all read from the parquet tables."""

from .compare import PooledArm, comparisons, paired_comparison
from .figures import FIGURES, save
from .frames import (GRADERS, Frames, accuracy_table, cells, conditions, label, load, search_style_table, time_split, tokens_per_turn,
                     tool_usage)
from .stats import bootstrap_ci, cluster_bootstrap, mcnemar_exact, paired_bootstrap

__all__ = ["FIGURES", "GRADERS", "Frames", "PooledArm", "accuracy_table", "bootstrap_ci", "cells", "cluster_bootstrap", "comparisons",
           "conditions", "label", "load", "mcnemar_exact", "paired_bootstrap", "paired_comparison", "save", "search_style_table",
           "time_split", "tokens_per_turn", "tool_usage"]
