"""Legends that never cover data: one per figure below the axes, or a panel's own to the right of its axes.

Constrained layout (every figure here uses it) makes room for both, so no legend is drawn inside an axes box.
"""

from __future__ import annotations

from typing import Optional

from matplotlib.figure import Figure


def below(fig: Figure, axes: list, title: Optional[str] = None, sort: bool = True) -> None:
    """One legend for the figure, below its axes; an entry that several panels draw appears once."""
    entries: dict = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(text, handle)
    if not entries:
        return
    if sort:
        entries = dict(sorted(entries.items()))  # the same order in every figure, whichever panel drew a line first
    widest = max(len(t) for t in entries) * 0.05 + 0.6  # inches per entry at fontsize 7
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", fontsize=7, title=title, title_fontsize=7,
               ncol=max(1, min(len(entries), int(fig.get_figwidth() // widest))))


def beside(ax, title: Optional[str] = None) -> None:
    """A panel's own legend, to the right of its axes: for entries that differ per panel (n per line)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=7, title=title, title_fontsize=7)
