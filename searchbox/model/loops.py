"""Stopping a reply that loops: a JSON string the model is writing that ends with one passage three times in a row.

SmolLM2 fills its final answer with one sentence over and over until the grammar's bound closes it (41 of 123
turns of the main command: results/benchmarks/main_command.md); the samplers that break such loops also change
replies that never looped (results/benchmarks/repetition.md). Watching the streamed reply changes nothing before
the stop: a reply that never repeats itself is byte for byte what it was, and one that does is cut where the
repetition is proven, as the bound would have cut it later.

The rule, as a researcher can check it against a trace: a reply loops once the JSON string it is writing ends with
a passage of at least `min_chars` characters holding at least `min_words` different words, written `repeats` times
in a row (verbatim, in the JSON text as generated). The reply is kept up to where the last copy begins (JSON schema
version 6; LoopWatch.feed says why), and never stopped where that would keep fewer than `min_string` characters of
the string. Shorter units (`0, 0, 0`, `| --- | --- |`, `very very`) never stop a reply, nor does a repeat that spans
a string's end (a list of equal items), nor anything outside a string.

Why only inside an open string: the reply is then cut where the next request's prompt closes the assistant turn
(`<|im_end|>` after the raw text) while every token the server may have generated past the cut, before it saw the
closed connection, is string content or the closing quote. So the server's cached prefix for the next request ends
at the cut however many tokens it generated after it, and the run stays a function of its key.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LoopRule:
    """What counts as a looping reply (see the module's docstring); part of the JSON schema version, so of the key."""

    repeats: int = 3
    min_chars: int = 20
    min_words: int = 3
    max_chars: int = 400  # longest unit looked for: a long sentence; the answer bound holds 480 characters in all
    # No string is stopped before it holds this many characters: twice the longest gold of the packaged and tiny
    # question sets (60), so a stopped answer always has room for a right one.
    min_string: int = 120

    def watch(self) -> "LoopWatch":
        return LoopWatch(self)


@dataclass
class LoopWatch:
    """Fed a reply's text as it streams in; `feed` says when it loops. One watch per reply (per attempt)."""

    rule: LoopRule
    text: str = ""
    in_string: bool = False
    escaped: bool = False
    string_start: int = 0  # where the string being written began (its first character), while in_string
    found: str = field(default="")  # the unit that repeated, once feed returned True
    kept: int = 0  # once feed returned True: where the stopped reply ends (its text[:kept]; see feed)
    piece: int = 0  # where the last piece fed began

    def feed(self, delta: str) -> bool:
        """Whether the reply loops once `delta`, the next piece the server sent, is read. A stopped reply keeps its
        text up to where the last copy of the passage begins (`kept`): two copies say all the third does, and the cut
        falls before the last piece read. That matters for the run's key: llama-server computes a token's place in its
        cache when it samples the next one, so every piece but the last was in its cache before the client closed,
        and the last was or was not by how soon the server saw the close; kept, the next request would have found it
        cached or prefilled it (another kernel, other last bits) by timing alone."""
        start = self.piece = len(self.text)
        self.text += delta
        for i, ch in enumerate(delta, start + 1):
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif ch == "\\":
                    self.escaped = True
                elif ch == '"':
                    self.in_string = False
            elif ch == '"':
                self.in_string, self.string_start = True, i
        return self.in_string and not self.escaped and self._loops()

    def _loops(self) -> bool:
        rule, text = self.rule, self.text
        end = len(text)
        longest = min(rule.max_chars, (end - self.string_start) // rule.repeats)
        for unit in range(rule.min_chars, longest + 1):
            cut = min(end - unit, self.piece)  # before the last copy and before the last piece
            if cut - self.string_start < rule.min_string:  # no room for every gold yet; a longer unit cuts earlier still
                return False
            if text[end - 1] != text[end - 1 - unit]:  # cheap first: most units fail on the last character
                continue
            tail = text[end - unit * rule.repeats:]
            # The tail has period `unit`: `repeats` copies of one passage, wherever the stream's chunks broke it. Its
            # words are counted without the two at its ends, which a rotated copy may have cut (`---` into `-`, `--`).
            if tail[unit:] == tail[:-unit] and len(set(tail.split()[1:-1])) >= rule.min_words:
                self.found = tail[-unit:]
                self.kept = cut
                return True
        return False
