"""Retrieval and the dataroom tool tiers: shapes, rerankers, API backends, shared index and cache, cache keys, setup time, failure kinds, GPU fallback."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from searchbox.config import HarnessConfig, RetrievalConfig
from searchbox.corpus.dataroom import open_workspace
from searchbox.errors import BackendError
from searchbox.retrieval import Retrieval
from searchbox.retrieval.cache import CachedEncoder, EmbeddingCache
from searchbox.retrieval.embedder import ApiEmbedder, LocalEmbedder, embedder_identity, identity_key, pick_device
from searchbox.retrieval.lexical import rrf
from searchbox.retrieval.rerank import ApiReranker, CrossEncoderReranker
from searchbox.tools import ToolContext, ToolError, Toolset, retrieval_tools, select
from searchbox.tools.retrieval_tools import answer_question, search_dataroom
from tests.fakes.loopback import JsonHandler, Loopback


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return open_workspace(tmp_path_factory.mktemp("ret") / "run", None)


@pytest.fixture(scope="module")
def shared_retrieval(workspace):
    return Retrieval(RetrievalConfig(), workspace.dataroom)


@pytest.fixture
def tools(workspace, shared_retrieval):
    return Toolset(select("all"), ToolContext(work=workspace.work, harness=HarnessConfig(output_cap_chars=100000), retrieval=shared_retrieval))


def call(ts, name, **args):
    out = ts.call(name, json.dumps(args))
    assert out.ok, out.error
    return json.loads(out.output)


def test_search_dataroom_shape_and_relevance(tools):
    out = call(tools, "search_dataroom", query="How tall is the Gannet Rock tower?", k=3)
    assert set(out) >= {"results", "scope_files", "scope_chunks"}
    assert out["scope_files"] == 7 and out["scope_chunks"] >= 7
    assert len(out["results"]) == 3
    top = out["results"][0]
    assert set(top) == {"path", "chunk", "score", "text"} and top["path"] == "dataroom/reports/gannet-rock-survey.md"
    scores = [r["score"] for r in out["results"]]
    assert scores == sorted(scores, reverse=True)


def test_search_scope_paths(tools):
    out = call(tools, "search_dataroom", query="restoration cost", k=10, paths=["dataroom/people", "reports/lighthouses.csv"])
    assert out["scope_files"] == 2
    assert {r["path"] for r in out["results"]} <= {"dataroom/people/staff.md", "dataroom/reports/lighthouses.csv"}
    bad = tools.call("search_dataroom", json.dumps({"query": "x", "paths": ["nowhere"]}))
    assert not bad.ok and "no file or folder 'nowhere'" in bad.error


@pytest.mark.parametrize("retriever", ["bm25", "hybrid"])
def test_lexical_and_hybrid(shared_retrieval, retriever):
    out = shared_retrieval.search("Tobias Wren conservation", k=2, retriever=retriever)
    assert out["retriever"] == retriever and out["results"][0]["path"] == "dataroom/people/staff.md"


def test_rrf():
    assert [i for i, _ in rrf([[1, 2, 3], [3, 1, 2]])] == [1, 3, 2]


def test_answer_question_without_reranker_passes_dense_order(tools):
    out = call(tools, "answer_question", question="Who led the Skerrow Point restoration?", k=2)
    assert out["reranked"] is False and out["reranker"] == "none"
    assert out["candidates"] >= 7 and len(out["results"]) == 2


def test_low_tier_shapes(tools, workspace):
    out = call(tools, "embed_texts", texts=["alpha", "beta"], role="query", out="vecs/e.jsonl")
    assert out == {"path": "vecs/e.jsonl", "count": 2, "dim": 384, "role": "query"}
    call(tools, "embed_texts", texts=["gamma"])
    lines = [json.loads(x) for x in (workspace.work / "vecs/e.jsonl").read_text().splitlines()]
    assert [x["i"] for x in lines] == [0, 1] and set(lines[0]) == {"i", "text", "role", "dim", "embedding"}
    assert abs(np.linalg.norm(lines[0]["embedding"]) - 1) < 1e-3
    r = call(tools, "rerank", query="kitten", documents=["car", "cat", "stock"], top_n=2)
    assert [x["index"] for x in r["results"]] == [1, 0] or r["results"][0]["index"] == 1
    assert len(r["results"]) == 2 and r["scorer"] == "embedding-cosine"
    s = call(tools, "similarity", a=["cat", "car"], b=["kitten", "truck"])
    assert s["mode"] == "pairwise" and len(s["similarities"]) == 2
    m = call(tools, "similarity", a=["cat"], b=["kitten", "truck", "bond"])
    assert m["mode"] == "matrix" and np.array(m["matrix"]).shape == (1, 3)
    c = call(tools, "classify", texts=["I scored a goal", "pasta with tomato"], labels=["sports", "food"])
    assert [x["label"] for x in c["results"]] == ["sports", "food"]
    cl = call(tools, "cluster", texts=["the cat sat", "the cat sat.", "quarterly revenue grew"])
    assert cl["n_clusters"] == 2 and cl["clusters"][0]["members"] == [0, 1]
    d = call(tools, "select_diverse", texts=["a cat", "a kitten", "bond yields", "a small cat"])
    assert len(d["kept_indices"]) == 2 and 2 in d["kept_indices"]
    bad = tools.call("embed_texts", json.dumps({"texts": ["x"], "out": "dataroom/x.jsonl"}))
    assert not bad.ok and "read-only" in bad.error
    assert not tools.call("classify", json.dumps({"texts": [], "labels": ["a"]})).ok


def _tiny_cross_encoder(path):
    """A random-weight BERT cross-encoder with MiniLM's tokenizer: exercises the real CrossEncoder path."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from searchbox.retrieval.embedder import default_model_path

    tok = AutoTokenizer.from_pretrained(default_model_path())
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def test_cross_encoder_reranker(tmp_path, workspace):
    cfg = RetrievalConfig(reranker="cross-encoder", rerank_model=_tiny_cross_encoder(tmp_path / "ce"))
    r = Retrieval(cfg, workspace.dataroom)
    ts = Toolset(select("all"), ToolContext(work=workspace.work, harness=HarnessConfig(output_cap_chars=100000), retrieval=r))
    out = call(ts, "answer_question", question="How tall is Gannet Rock?", k=3)
    assert out["reranked"] is True and out["reranker"].startswith("cross-encoder:")
    scores = [x["score"] for x in out["results"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 3
    rr = call(ts, "rerank", query="q", documents=["a", "b", "c"])
    assert rr["scorer"].startswith("cross-encoder:") and sorted(x["index"] for x in rr["results"]) == [0, 1, 2]
    assert r.stats()["reranker"].startswith("cross-encoder:")


class FakeJinaAPI:
    """Loopback stand-in for a Jina-style /embeddings and /rerank API."""

    def __init__(self):
        self.requests = []
        api = self

        class H(JsonHandler):
            def do_POST(self):
                body = self.json_body()
                api.requests.append((self.path, body, self.headers.get("Authorization")))
                if self.path.endswith("/embeddings"):
                    data = [{"index": i, "embedding": list(np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[:8] / 255.0 + 0.01)}
                            for i, t in enumerate(body["input"])]
                    out = {"data": data}
                else:
                    out = {"results": [{"index": i, "relevance_score": float(len(d))} for i, d in enumerate(body["documents"])]}
                self._send(200, out)

        self.server = Loopback(H, "/v1").start()
        self.url = self.server.url


def test_api_backends(workspace, monkeypatch):
    api = FakeJinaAPI()
    monkeypatch.setenv("JINA_API_KEY", "secret")
    cfg = RetrievalConfig(embedder="api", embed_model="jina-embeddings-v3", reranker="api", rerank_model="jina-reranker-v2", api_url=api.url, cache=False)
    emb = ApiEmbedder(cfg)
    v = emb.embed(["a", "b"], "query")
    assert v.shape == (2, 8) and np.allclose(np.linalg.norm(v, axis=1), 1)
    path, body, auth = api.requests[-1]
    assert path == "/v1/embeddings" and body["task"] == "retrieval.query" and auth == "Bearer secret"
    r = Retrieval(cfg, workspace.dataroom)
    out = r.answer("anything", k=2)
    assert out["reranked"] and out["reranker"] == "api:jina-reranker-v2"
    assert out["results"][0]["score"] >= out["results"][1]["score"]
    assert any(p == "/v1/rerank" for p, _, _ in api.requests)
    api.server.close()


SHARE_SCRIPT = """
import json, sys
from searchbox.config import IndexConfig, RetrievalConfig
from searchbox.retrieval import Retrieval
out = {}
for mode in ("index", "memory"):
    r = Retrieval(RetrievalConfig(), sys.argv[1], index=IndexConfig(persistent=mode == "index"))
    r.search("Gannet Rock", 2)
    out[mode] = {**r.stats()["cache"], "built": r.stats()["index"].get("built")}
print(json.dumps(out))
"""


def test_index_and_cache_are_shared_across_processes(tmp_path, workspace):
    """The first run builds the index (embedding every chunk once); a later run in another process opens
    it and embeds only its query, and an in-memory run there finds every passage in the disk cache."""
    env = {**os.environ, "SEARCHBOX_HOME": str(tmp_path / "home")}
    first, second = [json.loads(subprocess.run([sys.executable, "-c", SHARE_SCRIPT, str(workspace.dataroom)], capture_output=True, text=True,
                                               env=env, check=True, timeout=300).stdout.strip().splitlines()[-1]) for _ in range(2)]
    assert first["index"]["built"] is True and first["index"]["embedded"] == 8 and first["index"]["disk_hits"] == 0  # 7 chunks + the query
    assert second["index"]["built"] is False and second["index"]["embedded"] == 1 and second["index"]["disk_hits"] == 0
    assert second["memory"]["embedded"] == 1 and second["memory"]["disk_hits"] == 7


def _fake_model(folder, weights=b"w1", config='{"hidden": 4}'):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text(config)
    (folder / "README.md").write_text("docs do not change vectors")
    return str(folder)


def test_cache_key_covers_backend_url_model_files_and_prefixes(tmp_path):
    model = _fake_model(tmp_path / "m")
    base = RetrievalConfig(embed_model=model)
    key = lambda cfg: identity_key(embedder_identity(cfg))  # noqa: E731
    k0 = key(base)
    assert key(RetrievalConfig(embed_model=model)) == k0  # same config: same key
    variants = [RetrievalConfig(embed_model=model, query_prefix="query: "), RetrievalConfig(embed_model=model, passage_prefix="passage: "),
                RetrievalConfig(embed_model=str(tmp_path / "other")), RetrievalConfig(embedder="api", embed_model=model),
                RetrievalConfig(embedder="api", embed_model=model, api_url="http://other.example/v1")]
    _fake_model(tmp_path / "other")
    keys = [key(v) for v in variants]
    assert len(set(keys + [k0])) == len(keys) + 1
    (tmp_path / "m" / "README.md").write_text("edited docs")
    assert key(base) == k0
    (tmp_path / "m" / "model.safetensors").write_bytes(b"w2")  # new weights, same name
    k_weights = key(base)
    (tmp_path / "m" / "config.json").write_text('{"hidden": 8}')
    assert len({k0, k_weights, key(base)}) == 3


class _Fake:
    def __init__(self, identity):
        self.model_id, self.identity, self.calls = "same-model-id", identity, 0

    def embed(self, texts, role):
        self.calls += len(texts)
        return np.ones((len(texts), 4), dtype=np.float32) / 2


def test_cache_misses_when_identity_changes_and_hits_when_equal(tmp_path):
    disk = EmbeddingCache(tmp_path / "v.sqlite")
    a = CachedEncoder(_Fake("emb1-a"), disk)
    a.encode(["one", "two"], "passage")
    same = CachedEncoder(_Fake("emb1-a"), EmbeddingCache(tmp_path / "v.sqlite"))
    same.encode(["one", "two"], "passage")
    assert same.embedder.calls == 0 and same.stats["disk_hits"] == 2
    other = CachedEncoder(_Fake("emb1-b"), EmbeddingCache(tmp_path / "v.sqlite"))  # same model id, other files/prefix/backend
    other.encode(["one", "two"], "passage")
    assert other.embedder.calls == 2 and other.stats["disk_hits"] == 0


def test_setup_is_counted_apart_from_tool_time(workspace, tmp_path):
    r = Retrieval(RetrievalConfig(reranker="cross-encoder", rerank_model=_tiny_cross_encoder(tmp_path / "ce")), workspace.dataroom)
    ts = Toolset(select("all"), ToolContext(work=workspace.work, harness=HarnessConfig(output_cap_chars=100000), retrieval=r))
    assert r.timing.setup_s == 0.0  # constructing loads nothing
    first = ts.call("search_dataroom", json.dumps({"query": "Gannet Rock height", "k": 2}))
    assert first.ok and first.setup_ms > 0  # model loading and the index build
    after_first = r.timing.setup_s
    second = ts.call("search_dataroom", json.dumps({"query": "restoration cost", "k": 2}))
    assert second.ok and second.setup_ms == 0 and r.timing.setup_s == after_first
    rerank_first = ts.call("answer_question", json.dumps({"question": "Who led the restoration?", "k": 2}))
    assert rerank_first.ok and r.timing.setup_s > after_first  # the cross-encoder's loading
    again = ts.call("answer_question", json.dumps({"question": "How many visitors?", "k": 2}))
    assert again.ok and again.setup_ms == 0
    assert r.stats()["setup_s"] == round(r.timing.setup_s, 3)


class BrokenAPI:
    """A loopback embeddings/rerank API that fails: a status code, or well-formed JSON holding the wrong things."""

    def __init__(self, mode):
        class H(JsonHandler):
            def do_POST(self):
                body = self.json_body()
                if mode == "500":
                    self.send_response(500)
                    self.end_headers()
                    return
                n = len(body.get("input", body.get("documents", [])))
                out = {"too_few": {"data": [{"index": 0, "embedding": [1.0, 0.0]}][: n - 1]},
                       "nan": {"data": [{"index": i, "embedding": [float("nan"), 1.0]} for i in range(n)]},
                       "shape": {"data": [{"index": i, "embedding": "abc"} for i in range(n)]},
                       "rerank": {"results": [{"index": 99, "relevance_score": 1.0}]}}[mode]
                self._send(200, out)

        self.server = Loopback(H, "/v1").start()
        self.url = self.server.url


@pytest.mark.parametrize("mode", ["500", "too_few", "nan", "shape"])
def test_embedding_api_failures_are_backend_errors(workspace, mode):
    api = BrokenAPI(mode)
    cfg = RetrievalConfig(embedder="api", embed_model="jina-embeddings-v3", api_url=api.url, cache=False)
    with pytest.raises(BackendError, match="embedding API"):
        ApiEmbedder(cfg).embed(["a", "b"], "query")
    ctx = ToolContext(work=workspace.work, harness=HarnessConfig(), retrieval=Retrieval(cfg, workspace.dataroom))
    with pytest.raises(BackendError):  # through the tool: not shown to the model, the run stops as tool_error
        search_dataroom(ctx, "Gannet Rock")
    api.server.close()


def test_reranker_and_model_failures_are_backend_errors(workspace, tmp_path):
    api = BrokenAPI("rerank")
    with pytest.raises(BackendError, match="rerank API"):
        ApiReranker(RetrievalConfig(reranker="api", rerank_model="r", api_url=api.url)).score("q", ["a", "b"])
    api.server.close()
    with pytest.raises(BackendError, match="not found locally|failed to load"):
        LocalEmbedder(RetrievalConfig(embed_model=str(tmp_path / "no-such-model")))
    with pytest.raises(BackendError, match="cross-encoder"):
        CrossEncoderReranker(str(tmp_path / "no-such-ce"))
    r = Retrieval(RetrievalConfig(embed_model=str(tmp_path / "no-such-model")), workspace.dataroom)
    with pytest.raises(BackendError):
        search_dataroom(ToolContext(work=workspace.work, harness=HarnessConfig(), retrieval=r), "Gannet Rock")


def test_model_argument_errors_stay_tool_errors(tools, shared_retrieval, workspace):
    ctx = ToolContext(work=workspace.work, harness=HarnessConfig(), retrieval=shared_retrieval)
    for call in (lambda: search_dataroom(ctx, "   "), lambda: search_dataroom(ctx, "x", paths=["nowhere"]),
                 lambda: search_dataroom(ctx, "x", k=0), lambda: answer_question(ctx, ""),
                 lambda: retrieval_tools.embed_texts(ctx, ["t"] * (retrieval_tools.MAX_TEXTS + 1))):
        with pytest.raises(ToolError):
            call()
    bad = tools.call("search_dataroom", json.dumps({"query": ""}))
    assert not bad.ok and "non-empty" in bad.error


def test_gpu_fallback_on_low_vram():
    assert pick_device("cuda", 2.0, 0.5) == ("cpu", "free VRAM 0.5 GiB below 2 GiB")
    assert pick_device("cuda", 2.0, None)[0] == "cpu"
    assert pick_device("cuda", 2.0, 10.0)[0] == "cuda"
    assert pick_device("auto", 2.0, 10.0)[0] == "cuda"
    emb = LocalEmbedder(RetrievalConfig(device="cuda", min_free_vram_gb=4.0), free_gb_probe=lambda: 1.0)
    assert emb.device == "cpu" and "below" in emb.device_reason
    assert emb.embed(["x"], "query").shape == (1, 384)


def test_gpu_out_of_memory_while_loading_falls_back_to_cpu(monkeypatch):
    import sentence_transformers

    real = sentence_transformers.SentenceTransformer
    devices = []

    def loader(source, device="cpu", **kw):
        devices.append(device)
        if device == "cuda":
            raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB")
        return real(source, device=device, **kw)

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", loader)
    emb = LocalEmbedder(RetrievalConfig(device="cuda", min_free_vram_gb=1.0), free_gb_probe=lambda: 8.0)
    assert devices == ["cuda", "cpu"]
    assert emb.device == "cpu" and "out of memory" in emb.device_reason
    assert emb.embed(["x"], "passage").shape == (1, 384)
