"""Markup in corpus documents that is not the document's own text: bookmark cards about another page, tags, link targets."""

from __future__ import annotations

import re

# A bookmark card (Ghost's kg-bookmark-card, or any of its kg-bookmark-* parts) shows another page's title, description,
# author and publisher; scripts
# and styles are code. None of it is a statement of the document it sits in.
FOREIGN = re.compile(r"<figure[^>]*kg-bookmark-card.*?</figure>|<(div|span|a|p)\b[^>]*class=\"[^\"]*kg-bookmark[^\"]*\"[^>]*>.*?</\1>"
                     r"|<script.*?</script>|<style.*?</style>", re.DOTALL | re.IGNORECASE)
TAG = re.compile(r"<[^>\n]*>")
IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#39;": "'", "&nbsp;": " "}


def strip(body: str) -> str:
    """A document body as prose: foreign blocks dropped; tags, images and link targets removed; entities decoded."""
    body = FOREIGN.sub("\n", body)
    body = IMAGE.sub(" ", body)
    body = LINK.sub(r"\1", body)
    body = TAG.sub(" ", body)
    for entity, char in ENTITIES.items():
        body = body.replace(entity, char)
    return body


def foreign_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the blocks that are not the document's own text (bookmark cards, scripts, styles)."""
    return [m.span() for m in FOREIGN.finditer(text)]
