"""The noise axis: distractors at a ratio of the dataroom's bytes, reproducible per seed, gold files untouched."""

from __future__ import annotations

import os

import hashlib
import json
import random
import shutil
import zipfile
from pathlib import Path

import pytest

from searchbox.corpus import noise
from searchbox.config import NoiseConfig
from searchbox.corpus.dataroom import builtin_dataroom
from searchbox.errors import ConfigError, SetupError

WORDS = ("the harbour keeper walked along the northern pier before dawn and counted the boats that had come in "
         "with the tide while gulls argued over nets drying on the stones of the old quay").split()


def tiny_files() -> list[tuple[str, int]]:
    root = builtin_dataroom()
    return sorted((p.relative_to(root).as_posix(), p.stat().st_size) for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A folder corpus of 400 prose files (120-2000 bytes), one of them clashing with a dataroom name."""
    root = tmp_path_factory.mktemp("distractors")
    rng = random.Random(7)
    for i in range(400):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 330)))[: rng.randint(120, 2000)]
        folder = root / ("essays" if i % 3 else "reports")  # `reports/` is a dataroom folder too
        folder.mkdir(exist_ok=True)
        (folder / f"essay-{i:03d}.md").write_text(text + "\n")
    (root / "README.md").write_text("A distractor that shares its name with the dataroom's README.\n" * 3)
    return root


def test_noise_adds_ratio_times_the_bytes(corpus):
    files = tiny_files()
    original = sum(size for _, size in files)
    largest = max(p.stat().st_size for p in corpus.rglob("*") if p.is_file())
    for ratio in (1, 4, 16):
        planned = noise.plan(NoiseConfig(ratio=ratio, seed=3, source=str(corpus)), files)
        added = sum(d.bytes for d in planned)
        # tolerance: half the largest member (the last draw is kept only if it lands closer to the target)
        assert abs(added - ratio * original) <= largest / 2, (ratio, added, ratio * original)
    assert noise.plan(NoiseConfig(ratio=0, source=str(corpus)), files) == []


def test_reproducible_for_a_seed_different_for_another(corpus):
    files = tiny_files()
    a = noise.plan(NoiseConfig(ratio=4, seed=1, source=str(corpus)), files)
    b = noise.plan(NoiseConfig(ratio=4, seed=1, source=str(corpus)), files)
    c = noise.plan(NoiseConfig(ratio=4, seed=2, source=str(corpus)), files)
    assert a == b
    assert {d.source_member for d in a} != {d.source_member for d in c}


def test_apply_keeps_gold_files_and_names_distractors_like_documents(corpus, tmp_path):
    room = tmp_path / "dataroom"
    shutil.copytree(builtin_dataroom(), room)
    before = {p.relative_to(room).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in room.rglob("*") if p.is_file()}
    planned = noise.plan(NoiseConfig(ratio=16, seed=0, source=str(corpus)), tiny_files())
    added = noise.apply(room, planned)
    after = {p.relative_to(room).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in room.rglob("*") if p.is_file()}
    assert all(after[k] == v for k, v in before.items())  # every original (gold) file byte-identical
    assert set(after) == set(before) | {a["path"] for a in added}
    assert sum(a["bytes"] for a in added) == sum((room / a["path"]).stat().st_size for a in added)
    paths = [a["path"] for a in added]
    assert not any(p.split("/")[0].startswith(("_", ".")) or "noise" in p for p in paths)  # no tell-tale folder
    assert any(p.startswith("reports/") for p in paths)  # they keep their own relative paths, sharing folders
    if any(d.source_member == "README.md" for d in planned):
        assert "README-2.md" in paths  # de-conflicted, never overwriting the dataroom's README.md
    with pytest.raises(FileExistsError):
        noise.apply(room, planned[:1])  # applying twice would overwrite: refused


def test_clash_with_a_dataroom_file_used_as_folder(tmp_path):
    src = tmp_path / "src"
    (src / "README.md").mkdir(parents=True)
    (src / "README.md" / "inner.md").write_text("x" * 500)
    (src / "other.md").write_text("y" * 500)
    planned = noise.plan(NoiseConfig(ratio=100, seed=0, source=str(src)), [("README.md", 10)])
    assert [d.path for d in planned] == ["inner-2.md", "other.md"]  # its folder is a dataroom file: placed at the top


def test_too_small_a_corpus_is_a_config_error(corpus):
    with pytest.raises(ConfigError, match=r"noise=1e\+06 needs .* bytes of distractors"):
        noise.plan(NoiseConfig(ratio=1e6, seed=0, source=str(corpus)), tiny_files())
    with pytest.raises(ConfigError, match="no such zip or folder"):
        noise.plan(NoiseConfig(ratio=1, source=str(corpus / "missing.zip")), tiny_files())


def test_default_corpus_missing_says_run_setup():
    with pytest.raises(SetupError, match="python -m searchbox setup"):
        noise.plan(NoiseConfig(ratio=1), tiny_files())  # isolated SEARCHBOX_HOME: nothing installed


def test_default_corpus_builder_is_flat_deterministic_and_filtered(tmp_path):
    summaries = {
        "Lighthouse": {"title": "Lighthouse", "extract": "A lighthouse is a tower that emits light.", "description": "Tower"},
        "Café": {"title": "Café", "extract": "A café is an establishment that serves coffee."},
        "Jina": {"title": "Jina", "extract": "Jina is a term in Jainism."},  # excluded: could touch the built-in questions
        "Empty": {"title": "Empty", "extract": ""},
    }
    blob = json.dumps(summaries).encode()
    a, b = tmp_path / "a.zip", tmp_path / "b.zip"
    info = noise.build_wikipedia_corpus(blob, a)
    noise.build_wikipedia_corpus(blob, b)
    assert a.read_bytes() == b.read_bytes()
    assert info["documents"] == 2 and info["skipped"] == 2 and "CC BY-SA 4.0" in info["license"]
    with zipfile.ZipFile(a) as zf:
        assert zf.namelist() == ["cafe.md", "lighthouse.md"]
        assert zf.read("lighthouse.md").decode() == "# Lighthouse\n\n*Tower*\n\nA lighthouse is a tower that emits light.\n"


def test_installed_default_corpus_draws_noise(real_home):
    if not noise.WIKIPEDIA_VITAL.path.is_file():
        pytest.skip("default distractor corpus not installed (python -m searchbox setup)")
    files = tiny_files()
    planned = noise.plan(NoiseConfig(ratio=4, seed=0), files)
    assert abs(sum(d.bytes for d in planned) - 4 * sum(s for _, s in files)) <= 1500
    assert all("/" not in d.path and d.path.endswith(".md") for d in planned)


def test_a_noisy_run_records_what_was_added(corpus, tmp_path):
    """Through run.execute: the run's dataroom holds the distractors, run_meta lists them, the gold file is intact."""
    from tests.conftest import make_cfg, run_script

    cfg = make_cfg()
    cfg.noise = NoiseConfig(ratio=4, seed=5, source=str(corpus))
    script = [{"tool_calls": [{"name": "read", "arguments": {"path": "dataroom/reports/gannet-rock-survey.md"}}]}, {"content": "38.4 metres"}]
    meta, _, run_dir = run_script(tmp_path, script, cfg)
    added = meta["dataroom"]["noise"]
    original = sum(size for _, size in tiny_files())
    assert added and sum(a["bytes"] for a in added) == pytest.approx(4 * original, abs=1000)
    assert meta["dataroom"]["bytes"] == original + sum(a["bytes"] for a in added)
    from searchbox.corpus import store

    assert os.listdir(run_dir / "work" / "dataroom") == []  # the run holds a mount point, no copy
    view = store.find_copy(meta["dataroom"]["sha256"])
    base = store.find_copy(meta["dataroom"]["identity"])
    room = view.data
    assert all((room / a["path"]).is_file() for a in added)
    gold = room / "reports" / "gannet-rock-survey.md"
    assert gold.read_bytes() == (builtin_dataroom() / "reports" / "gannet-rock-survey.md").read_bytes()
    assert gold.stat().st_ino == (base.data / "reports" / "gannet-rock-survey.md").stat().st_ino  # a link, not a byte copy
    again, _, _ = run_script(tmp_path, script, cfg, name="again")
    assert [a["path"] for a in again["dataroom"]["noise"]] == [a["path"] for a in added]  # same seed, same draw
    assert again["dataroom"]["sha256"] == meta["dataroom"]["sha256"]
    assert len([p for p in base.root.iterdir() if p.name.startswith("noise-")]) == 1  # one view shared by both runs
