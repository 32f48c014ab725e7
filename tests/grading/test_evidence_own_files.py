"""Round four, evidence: text the agent put in its own files (outside dataroom/) and printed back beside a read of the gold
file is its own, however it typed it (in pieces, or base64 it decoded): each command runs in real bwrap under real strace."""

from __future__ import annotations

import base64
import shlex

from tests.grading.test_evidence_opens import GOLD, LINE, _bash, _run, needs_box

HALF = len(LINE) // 2
B64 = base64.b64encode(LINE.encode()).decode()
WRITE_IN_PIECES = [f"printf %s {shlex.quote(LINE[:HALF])} > notes.md", f"printf '%s\\n' {shlex.quote(LINE[HALF:])} >> notes.md"]


@needs_box
def test_a_note_typed_in_pieces_printed_beside_a_read_of_the_gold_file_is_no_evidence(tmp_path):
    ev = _bash(_run(tmp_path), [*WRITE_IN_PIECES, f"cat notes.md; wc -l dataroom/{GOLD}"])
    assert ev.recall == 0.0


@needs_box
def test_a_decoded_note_printed_beside_a_read_of_the_gold_file_is_no_evidence(tmp_path):
    ev = _bash(_run(tmp_path), [f"echo {B64} | base64 -d > notes.md", f"cat notes.md dataroom/other.md; head -c 0 dataroom/{GOLD}"])
    assert ev.recall == 0.0


@needs_box
def test_a_forged_grep_line_in_a_note_is_no_evidence(tmp_path):
    forged = f"dataroom/{GOLD}:3:{LINE}"
    ev = _bash(_run(tmp_path), [f"printf %s {shlex.quote(forged[:HALF])} > notes.md", f"printf '%s\\n' {shlex.quote(forged[HALF:])} >> notes.md",
                                f"cat notes.md; wc -l dataroom/{GOLD}"])
    assert ev.recall == 0.0


@needs_box
def test_a_search_over_the_work_folder_still_shows_the_gold_line(tmp_path):
    """Not a hole: grep over work/ reads the agent's notes too, and the line it prints from the gold file, named by its path,
    still counts."""
    ev = _bash(_run(tmp_path), ["echo 'my notes: look for the curator' > notes.md", "grep -rn Whitfield ."])
    assert ev.recall == 1.0
    assert _bash(_run(tmp_path / "b"), [f"cat dataroom/{GOLD}"]).recall == 1.0
