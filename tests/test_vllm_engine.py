"""The vLLM engines (``pipeline.backends.vllm_engine``) on a CPU: everything but the GPU call, on the real
Qwen vocabulary; and the ``vllm serve`` commands (``pipeline.gpu.serve``).

The Qwen2/Qwen3 vocabulary comes from the shipped GGUF (``pipeline.backends.vocab.qwen_vocab``). The three GPU
calls (``run_embed``, ``run_classify``, ``run_letter_logprobs``) are replaced by the same computation
on CPU models that exist here: the letter log-probabilities and the reranker's p(yes) by llama.cpp
running the shipped Qwen2.5-1.5B on exactly the tokens the vLLM backend would send, the embeddings by
e5. Those stand-ins are real models, not canned numbers; vLLM itself is not run here (no GPU).
"""
from dataclasses import dataclass

import numpy as np
import pytest

from pipeline.backends import vllm_engine
from pipeline.backends.registry import Models
from pipeline.backends.vllm_engine import STAGES, VllmAnswerer, VllmEmbedder, VllmReranker, engine_args
from pipeline.backends.vocab import qwen_vocab
from pipeline.prompts import (EMPTY_THINK, RERANK_LABELS, letter_prompt, letter_token_ids, passage_text,
                              rerank_document, rerank_prompt, rerank_query, with_think_block)
from pipeline.settings import load_settings
from pipeline.types import LETTERS, Candidate, Chunk, Question

TEXT = "Ратуша міста Вербівка має жовтий дах, який видно з усіх пагорбів довкола."
Q = Question("1", "Якого кольору дах ратуші в місті Вербівка?",
             ["синього", "червоного", "зеленого", "чорного", "жовтого", "білого"])
TEXT2 = "Виробник надає гарантію на зволожувач строком 36 місяців від дня продажу."
Q2 = Question("2", "Який строк гарантії на зволожувач?",
              ["6 місяців", "12 місяців", "24 місяці", "36 місяців", "48 місяців", "без гарантії"])


def cand(body, rank=1, heading="Розділ"):
    return Candidate(Chunk(f"d:{rank}", "d", "d.pdf", rank, heading, body, "Інструкція", [(1, 0, len(body))]),
                     {"fused": 1.0}, rank)


@pytest.fixture(scope="module")
def vocab():
    return qwen_vocab()


# ---- token ids and prompts on the Qwen vocabulary ------------------------------------------------------
def test_letter_and_label_token_ids(vocab):
    ids = letter_token_ids(vocab.encode)
    assert ids == [362, 425, 356, 422, 468, 434]
    assert [vocab.decode([i]) for i in ids] == [f" {L}" for L in LETTERS]
    # the reranker's labels are single tokens, the ids vLLM's Qwen3-Reranker example names (no=2152, yes=9693)
    assert [vocab.encode(t) for t in RERANK_LABELS] == [[2152], [9693]]


def test_reranker_prompt_is_the_model_cards_and_option_aware(vocab):
    s = load_settings("t4x2")
    c = cand(TEXT)
    p = rerank_prompt(s.rerank_instruction, rerank_query(Q), rerank_document(c))
    assert p == ('<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the '
                 'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
                 f'<Instruct>: {s.rerank_instruction}\n<Query>: {Q.text}\nA. синього\nB. червоного\nC. зеленого\n'
                 f'D. чорного\nE. жовтого\nF. білого\n<Document>: {passage_text(c)}<|im_end|>\n'
                 '<|im_start|>assistant\n<think>\n\n</think>\n\n')
    toks = vocab.encode(p)
    assert toks[:3] == [151644, 8948, 198]  # <|im_start|> is parsed as the special token, not spelled out
    assert toks.count(151644) == 3 and toks.count(151645) == 2  # three turns opened, two closed
    assert vocab.decode(toks).endswith("</think>\n\n") and len(toks) < s.rerank_max_len
    rr = VllmReranker(s, llm=object(), tokenizer=vocab, run=lambda llm, prompts: [0.0] * len(prompts))
    assert rr.prompts(Q, [c]) == [p]


def test_reranker_prompts_are_cut_to_fit_max_model_len(vocab):
    """One prompt over rerank_max_len would fail the whole batch in vLLM: each document is cut to fit."""
    s = load_settings("t4x2", rerank_max_len=512)
    huge = cand("Довгий текст без потрібної відповіді. " * 400, 2)
    rr = VllmReranker(s, llm=object(), tokenizer=vocab, run=lambda llm, prompts: [0.0] * len(prompts))
    short, cut = rr.prompts(Q, [cand(TEXT), huge])
    assert short == rerank_prompt(s.rerank_instruction, rerank_query(Q), rerank_document(cand(TEXT)))
    assert len(vocab.encode(huge.chunk.body)) > 512 >= len(vocab.encode(cut))
    assert cut.startswith(short.split("<Document>: ")[0]) and cut.endswith("<think>\n\n</think>\n\n")


def test_answer_prompt_turns_thinking_off_and_fits_max_model_len(vocab):
    count = lambda t: len(vocab.encode(t))  # noqa: E731
    s = load_settings("t4x2")
    p = letter_prompt(Q, [cand(TEXT)], s, count)
    assert p.endswith("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nВідповідь:")
    assert p.count(EMPTY_THINK) == 1 and with_think_block(p) == p
    assert all(f"{L}. {o}" in p for L, o in zip(LETTERS, Q.options)) and TEXT in p
    small = load_settings("t4x2", n_ctx=1024)
    huge = cand("Довгий текст без потрібної відповіді. " * 3000, 2)
    cut = letter_prompt(Q, [cand(TEXT), huge], small, count)
    assert count(cut) <= 1024 - 8 and TEXT in cut and Q.text in cut and cut.endswith("Відповідь:")
    assert all(f"{L}. {o}" in cut for L, o in zip(LETTERS, Q.options))


def test_engine_arguments_for_two_t4s(monkeypatch):
    for name in ("t4x2", "t4x2-paper"):
        s = load_settings(name)
        for stage in STAGES:
            a = engine_args(s, stage)
            assert a["dtype"] == "half" and a["tensor_parallel_size"] == 2  # T4: no bfloat16; two GPUs
            assert a["attention_config"] == {"backend": "TRITON_ATTN"}  # FlashAttention needs cc >= 8.0
        assert engine_args(s, "embed")["runner"] == "pooling" and "hf_overrides" not in engine_args(s, "embed")
        assert engine_args(s, "rerank")["hf_overrides"] == {
            "architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "yes"],
            "is_original_qwen3_reranker": True}
        ans = engine_args(s, "answer")
        assert ans["quantization"] == "awq" and ans["max_model_len"] == s.n_ctx == 8192 and ans["runner"] == "generate"
        assert "quantization" not in engine_args(s, "embed") and "quantization" not in engine_args(s, "rerank")
    paper = load_settings("t4x2-paper")
    assert [engine_args(paper, st)["model"] for st in STAGES] == [
        "Qwen/Qwen3-Embedding-8B", "Qwen/Qwen3-Reranker-8B", "Qwen/Qwen3-32B-AWQ"]
    monkeypatch.setenv("PDFQA_VLLM_ARGS", '{"swap_space": 0, "max_num_batched_tokens": 4096}')
    assert engine_args(load_settings("t4x2"), "answer")["max_num_batched_tokens"] == 4096


def test_without_vllm_the_backend_says_what_to_install():
    if vllm_engine.vllm is not None:
        pytest.skip("vLLM is installed here")
    with pytest.raises(ImportError, match="pip install -r requirements-gpu.txt"):
        Models(load_settings("t4x2")).embedder


# ---- the backends, with the GPU call done by a CPU model -------------------------------------------------
def llama_letters(local):
    """run_letter_logprobs on llama.cpp: the same token ids in, the log-probabilities of ``ids`` out."""
    def run(llm, prompts, ids):
        out = []
        with local._lock:
            for p in prompts:
                lp = local._eval(list(p))
                out.append({i: float(lp[i]) for i in ids})
        return out
    return run


def llama_yes(local, vocab):
    """run_classify on llama.cpp: p(yes) = sigmoid(logit yes - logit no) at the last token, as vLLM's converted head."""
    yes, no = vocab.encode("yes")[0], vocab.encode("no")[0]

    def run(llm, prompts):
        out = []
        with local._lock:
            for p in prompts:
                lp = local._eval(vocab.encode(p))
                out.append(float(1 / (1 + np.exp(-(lp[yes] - lp[no])))))
        return out
    return run


def test_vllm_answerer_batch(models, vocab):
    local = models.answerer
    # the stand-in model (Qwen2.5) was not trained with thinking blocks: those are checked on tokens above
    s = load_settings("t4x2", think_block=False, n_ctx=4096)
    ans = VllmAnswerer(s, llm=local.llm, tokenizer=vocab, run=llama_letters(local))
    assert ans.letter_ids == local.letter_ids
    ids = ans.prompt_ids(Q, [cand(TEXT)])
    assert vocab.decode(ids).endswith("<|im_start|>assistant\nВідповідь:") and len(ids) < s.n_ctx
    got = ans.score_batch([(Q, [cand(TEXT)]), (Q2, [cand(TEXT2)])])
    assert [max(g.probabilities, key=g.probabilities.get) for g in got] == ["E", "D"]
    assert all(sum(g.probabilities.values()) == pytest.approx(1.0) and g.letter == g.probabilities for g in got)
    assert got[0].prompt_tokens == len(ids)
    with pytest.raises(ValueError, match="letters only"):
        VllmAnswerer(load_settings("t4x2", scorer="option"), llm=local.llm, tokenizer=vocab)


def test_vllm_reranker_batch(models, vocab):
    s = load_settings("t4x2")
    rr = VllmReranker(s, llm=models.answerer.llm, tokenizer=vocab, run=llama_yes(models.answerer, vocab))
    off = cand("Бібліотека працює з вівторка по суботу з 10:00 до 19:00.", 2, "Розклад")
    got = rr.score_batch([(Q, [cand(TEXT), off]), (Q2, [cand(TEXT2, 3)])])
    assert [len(g) for g in got] == [2, 1] and all(0.0 < x < 1.0 for g in got for x in g)
    assert got[0][0] > got[0][1]  # the passage that answers ranks above the one that does not


def test_vllm_embedder_prefixes_queries_and_normalises(embedder, vocab):
    s = load_settings("t4x2")
    seen = []

    def e5(llm, texts):  # unnormalised vectors from a real model
        seen.append(list(texts))
        return (3.0 * embedder.embed_passages(texts)).tolist()

    emb = VllmEmbedder(s, llm=object(), tokenizer=vocab, run=e5)
    v = emb.embed_queries(["Якого кольору дах?"])
    assert seen[-1] == [s.embed_query_prefix + "Якого кольору дах?"]
    assert seen[-1][0].startswith("Instruct: ") and seen[-1][0].endswith("\nQuery:Якого кольору дах?")
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    p = emb.embed_passages([TEXT])
    assert seen[-1] == [TEXT] and np.allclose(p, embedder.embed_passages([TEXT]), atol=1e-6)
    assert emb.count_word_tokens("зволожувач") == len(vocab.encode(" зволожувач")) > 1


def test_serve_commands_run_the_same_engines_as_the_profile():
    from pipeline.gpu.serve import PORTS, serve_command

    s = load_settings("t4x2")
    rr = serve_command(s, "rerank")
    assert rr[:3] == ["vllm", "serve", "Qwen/Qwen3-Reranker-0.6B"] and rr[rr.index("--port") + 1] == "8002"
    assert rr[rr.index("--hf-overrides") + 1] == ('{"architectures": ["Qwen3ForSequenceClassification"], '
                                                  '"classifier_from_token": ["no", "yes"], '
                                                  '"is_original_qwen3_reranker": true}')
    ans = serve_command(s, "answer")
    for flag, value in (("--dtype", "half"), ("--tensor-parallel-size", "2"), ("--gpu-memory-utilization", "0.63"),
                        ("--max-model-len", "8192"), ("--attention-backend", "TRITON_ATTN"), ("--quantization", "awq"),
                        ("--runner", "generate")):
        assert ans[ans.index(flag) + 1] == value
    # booleans are vLLM's --flag / --no-flag pairs: False is said, not dropped
    assert "--no-enforce-eager" in ans and "--enforce-eager" not in ans
    assert "--enforce-eager" in serve_command(load_settings("t4x2", vllm_enforce_eager=True), "answer")
    # the remote profile points at those ports
    r = load_settings("remote")
    assert [r.answer_url, r.embed_url, r.rerank_url] == [f"http://127.0.0.1:{PORTS[st]}/v1"
                                                         for st in ("answer", "embed", "rerank")]
    assert [r.embed_model, r.rerank_model, r.answer_model] == [s.embed_model, s.rerank_model, s.answer_model]


# ---- the free-text interface: request building and output parsing ---------------------------------------------
# vLLM cannot run here (no GPU). These fakes stand for vLLM's output objects only (RequestOutput, its
# CompletionOutput and Logprob, with the fields the backend reads); their numbers are made up for the test, so
# what is checked is which requests are built and which numbers are read back, not a model.
@dataclass
class FakeVllmLogprob:
    logprob: float


@dataclass
class FakeVllmCompletionOutput:
    text: str = ""
    logprobs: list | None = None  # per generated position: {token id: FakeVllmLogprob}


@dataclass
class FakeVllmRequestOutput:
    prompt_token_ids: list
    outputs: list
    prompt_logprobs: list | None = None  # per prompt position: {token id: FakeVllmLogprob} (None at the first)


class FakeVllmGenerate:
    """Stands for ``run_generate`` (``llm.generate``): records the requests, answers with ``reply``."""

    def __init__(self, reply):
        self.calls, self.reply = [], reply

    def __call__(self, llm, prompts, params):
        self.calls.append((prompts, params))
        return [self.reply(p, params) for p in prompts]


def fake_answerer(vocab, reply, **kw):
    gen = FakeVllmGenerate(reply)
    s = load_settings("t4x2", **kw)
    return VllmAnswerer(s, llm=object(), tokenizer=vocab, run=None, generate=gen), gen


def test_vllm_generate_request_is_greedy_on_the_pieces_tokens(vocab):
    ans, gen = fake_answerer(vocab, lambda p, params: FakeVllmRequestOutput(p, [FakeVllmCompletionOutput(" 36 місяців")]))
    prefix, tail = "<|im_start|>user\nЯким є строк гарантії?", "<|im_end|>\n<|im_start|>assistant\nВідповідь:"
    assert ans.generate([prefix, tail], 40, stop=["\n"]) == " 36 місяців"
    (prompts, params), = gen.calls
    assert prompts == [vocab.encode(prefix) + vocab.encode(tail)]  # each piece tokenized on its own
    assert params == {"temperature": 0.0, "max_tokens": 40, "stop": ["\n"]}
    assert ans.count_tokens(prefix) == len(vocab.encode(prefix))


def test_vllm_continuations_are_read_from_prompt_logprobs(vocab):
    def reply(p, params):  # position i holds its own token with log-probability -i/100, and another token
        rows = [None] + [{p[i]: FakeVllmLogprob(-i / 100), 0: FakeVllmLogprob(-0.001)} for i in range(1, len(p))]
        return FakeVllmRequestOutput(p, [FakeVllmCompletionOutput("x")], rows)

    ans, gen = fake_answerer(vocab, reply)
    prompt = ["Запитання: Якого кольору дах?", "<|im_end|>\n<|im_start|>assistant\nВідповідь:"]
    n = len(vocab.encode(prompt[0])) + len(vocab.encode(prompt[1]))
    conts = [" жовтого кольору", "", " синього"]
    got = ans.continuation_logprobs(prompt, conts, max_tokens=2)
    (prompts, params), = gen.calls  # one call for every non-empty continuation
    assert params == {"temperature": 0.0, "max_tokens": 1, "prompt_logprobs": 1}
    assert [len(p) - n for p in prompts] == [min(2, len(vocab.encode(c))) for c in conts if c]
    assert got[1] == [] and len(got[0]) == min(2, len(vocab.encode(conts[0])))
    assert got[0] == [-(n + j) / 100 for j in range(len(got[0]))]  # the continuation's own positions
    assert got[2] == [-(n + j) / 100 for j in range(len(vocab.encode(" синього")[:2]))]


def test_vllm_yes_no_from_the_first_tokens_top_logprobs(vocab):
    yes, no = vocab.encode(" так")[0], vocab.encode(" ні")[0]
    top = {yes: FakeVllmLogprob(-0.2), no: FakeVllmLogprob(-1.9), 13: FakeVllmLogprob(-4.0)}
    ans, gen = fake_answerer(vocab, lambda p, params: FakeVllmRequestOutput(p, [FakeVllmCompletionOutput(" так",
                                                                                                         [top])]))
    assert ans.yes_log_odds("Чи так?") == pytest.approx(-0.2 - -1.9)
    assert gen.calls[-1][1] == {"temperature": 0.0, "max_tokens": 1, "logprobs": 20}
    assert ans.yes_probability("Чи так?") == pytest.approx(1 / (1 + np.exp(-1.7)))
    del top[no]  # "no" outside the top list: counted as the least likely listed token
    assert ans.yes_log_odds("Чи так?") == pytest.approx(-0.2 - -4.0)


def test_free_reader_on_vllm_opens_qwen3_answers_with_an_empty_think_block(vocab):
    from pipeline.answering.freeform import FreeReader

    def reply(p, params):
        if "stop" in params:
            return FakeVllmRequestOutput(p, [FakeVllmCompletionOutput(" 36 місяців\n")])
        return FakeVllmRequestOutput(p, [FakeVllmCompletionOutput("", [{vocab.encode(" так")[0]: FakeVllmLogprob(-0.1),
                                                                      vocab.encode(" ні")[0]: FakeVllmLogprob(-3.0)}])])

    ans, gen = fake_answerer(vocab, reply)  # t4x2: Qwen3, think_block on
    r = FreeReader(ans).read(Question("q", "Яким є строк гарантії?", []), ["Гарантія — 36 місяців."], extract=False)
    assert r.generated == "36 місяців" and r.p_answerable == pytest.approx(1 / (1 + np.exp(-2.9)))
    assert set(r.p_supported) == {"36 місяців"}
    texts = [vocab.decode(p) for prompts, _ in gen.calls for p in prompts]
    assert len(texts) == 3 and all(t.endswith("<|im_start|>assistant\n" + EMPTY_THINK + "Відповідь:") for t in texts)
    assert all(t.count(EMPTY_THINK) == 1 and "Гарантія — 36 місяців." in t for t in texts)
