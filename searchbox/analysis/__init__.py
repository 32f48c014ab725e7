"""Analysis of sweep logs: tidy frames, statistics and figures, all read from the parquet tables."""

from .figures import FIGURES, save
from .frames import Frames, accuracy_table, bootstrap_ci, load, search_style_table, time_split, tokens_per_turn, tool_usage

__all__ = ["FIGURES", "Frames", "accuracy_table", "bootstrap_ci", "load", "save", "search_style_table", "time_split", "tokens_per_turn", "tool_usage"]
