"""Issue 37: `index build --json` printed every file name (a 370 KB line at 19K files); now counts, names on request."""

from __future__ import annotations

import json
import zipfile

from searchbox.retrieval.index.cli import main as cli


def test_build_json_prints_counts_and_names_only_on_request(tmp_path, capsys):
    archive = tmp_path / "c.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for i in range(400):
            zf.writestr(f"docs/doc{i:04d}.md", f"document {i} about lighthouse number {i}\n")
    assert cli(["build", str(archive), "--index", str(tmp_path / "ix"), "--embedder", "hash", "--json"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out)
    assert report["new_count"] == 400 and "new_files" not in report and "doc0007.md" not in out and len(out) < 2000
    assert cli(["build", str(archive), "--index", str(tmp_path / "ix2"), "--embedder", "hash", "--json", "--list-files"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed["new_files"]) == 400 and listed["new_count"] == 400
