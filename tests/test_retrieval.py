"""Retrieval and the dataroom tool tiers: output shapes, rerankers, API backends, the shared cache, GPU fallback."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from searchbox.config import HarnessConfig, RetrievalConfig
from searchbox.dataroom import open_workspace
from searchbox.retrieval import Retrieval
from searchbox.retrieval.embedder import ApiEmbedder, LocalEmbedder, pick_device
from searchbox.retrieval.lexical import rrf
from searchbox.tools import ToolContext, Toolset, select


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

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append((self.path, body, self.headers.get("Authorization")))
                if self.path.endswith("/embeddings"):
                    data = [{"index": i, "embedding": list(np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[:8] / 255.0 + 0.01)}
                            for i, t in enumerate(body["input"])]
                    out = {"data": data}
                else:
                    out = {"results": [{"index": i, "relevance_score": float(len(d))} for i, d in enumerate(body["documents"])]}
                raw = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


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
    api.httpd.shutdown()


CACHE_SCRIPT = """
import json, sys
from searchbox.config import RetrievalConfig
from searchbox.retrieval import Retrieval
r = Retrieval(RetrievalConfig(), sys.argv[1])
r.dense_matrix(r.scope(None))  # passages go through the disk cache; queries stay in memory
print(json.dumps(r.stats()["cache"]))
"""


def test_cache_is_shared_across_processes(tmp_path, workspace):
    env = {**__import__("os").environ, "SEARCHBOX_HOME": str(tmp_path / "home")}
    runs = [json.loads(subprocess.run([sys.executable, "-c", CACHE_SCRIPT, str(workspace.dataroom)], capture_output=True, text=True,
                                      env=env, check=True, timeout=300).stdout.strip().splitlines()[-1]) for _ in range(2)]
    first, second = runs
    assert first["embedded"] > 0 and first["disk_hits"] == 0
    assert second["embedded"] == 0 and second["disk_hits"] == first["embedded"]


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
