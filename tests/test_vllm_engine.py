"""The vLLM engines (``pipeline.backends.vllm_engine``) run by vLLM itself, on CPU; and the profiles' arguments.

vLLM's CPU build lives in a venv of its own (``.venv-vllm``, ``scripts/setup-vllm.sh``): each stage's engine is
built once per session by ``tests/vllm_driver.py`` under that venv, on the shipped Qwen2.5-Coder-1.5B converted
for vLLM (``pipeline.backends.vllm_model``), and what it returned is checked here, against llama.cpp running the
same weights (the ``cpu`` profile's engine) where the two can be compared. The prompts and token ids are also
checked on the Qwen vocabulary from the shipped GGUF (Qwen3's thinking block, the T4 profiles' lengths), and
every GPU profile's engine arguments and ``vllm serve`` command are read by vLLM's own argument classes. What
the CPU engine cannot show: GPU memory (``pipeline.gpu.plan``, tests/test_gpu_profiles.py), CUDA kernels.
"""
import math

import numpy as np
import pytest

from pipeline.backends import vllm_engine
from pipeline.backends.registry import Models
from pipeline.backends.vllm_engine import STAGES, VllmAnswerer, VllmReranker, engine_args
from pipeline.backends.vocab import qwen_vocab
from pipeline.prompts import (EMPTY_THINK, RERANK_LABELS, letter_prompt, letter_token_ids, passage_text,
                              rerank_document, rerank_prompt, rerank_query, with_think_block)
from pipeline.settings import load_settings
from pipeline.types import LETTERS
from vllm_driver import CONTINUATIONS, FREE_PROMPT, Q, Q2, TEST_SETTINGS, TEXT, TEXT2, YES_PROMPT, cand


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
    p = rerank_prompt(s.rerank.rerank_instruction, rerank_query(Q), rerank_document(c))
    assert p == ('<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the '
                 'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
                 f'<Instruct>: {s.rerank.rerank_instruction}\n<Query>: {Q.text}\nA. синього\nB. червоного\nC. зеленого\n'
                 f'D. чорного\nE. жовтого\nF. білого\n<Document>: {passage_text(c)}<|im_end|>\n'
                 '<|im_start|>assistant\n<think>\n\n</think>\n\n')
    toks = vocab.encode(p)
    assert toks[:3] == [151644, 8948, 198]  # <|im_start|> is parsed as the special token, not spelled out
    assert toks.count(151644) == 3 and toks.count(151645) == 2  # three turns opened, two closed
    assert vocab.decode(toks).endswith("</think>\n\n") and len(toks) < s.roles.rerank_max_len
    rr = VllmReranker(s, llm=object(), tokenizer=vocab, run=lambda llm, prompts: [0.0] * len(prompts))
    assert rr.prompts(Q, [c]) == [p]


def test_reranker_prompts_are_cut_to_fit_max_model_len(vocab):
    """One prompt over rerank_max_len would fail the whole batch in vLLM: each document is cut to fit."""
    s = load_settings("t4x2", rerank_max_len=512)
    huge = cand("Довгий текст без потрібної відповіді. " * 400, 2)
    rr = VllmReranker(s, llm=object(), tokenizer=vocab, run=lambda llm, prompts: [0.0] * len(prompts))
    short, cut = rr.prompts(Q, [cand(TEXT), huge])
    assert short == rerank_prompt(s.rerank.rerank_instruction, rerank_query(Q), rerank_document(cand(TEXT)))
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
        assert ans["max_model_len"] == s.answer.n_ctx == 8192 and ans["runner"] == "generate"
        # no quantization argument: vLLM reads the AWQ checkpoint's quantization_config and picks awq_marlin on a T4
        # (quantization="awq" would force the old AWQ kernel, about 10x slower decoding)
        assert all("quantization" not in engine_args(s, st) for st in STAGES)
        assert engine_args(s, "embed")["convert"] == "embed"
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


# ---- vLLM's engine on CPU (tests/vllm_driver.py under .venv-vllm) ---------------------------------------------
def _softmax(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    return [x / sum(e) for x in e]


def test_vllm_answerer_letters_match_llama_cpp_on_the_same_weights(vllm_stage, models, vocab):
    got = vllm_stage("answer")
    # the converted model's tokenizer gives exactly the GGUF vocabulary's ids (prompts, letters)
    s = load_settings("vllm-cpu", **TEST_SETTINGS)
    plain = VllmAnswerer(s, llm=object(), tokenizer=vocab)
    assert got["letter_ids"] == letter_token_ids(vocab.encode) == [362, 425, 356, 422, 468, 434]
    assert got["prompt_ids"] == [plain.prompt_ids(Q, [cand(TEXT)]), plain.prompt_ids(Q2, [cand(TEXT2)])]
    letters = got["letters"]
    assert [max(p, key=p.get) for p in letters] == ["E", "D"]
    assert all(sum(p.values()) == pytest.approx(1.0) for p in letters)
    assert got["prompt_tokens"] == [len(ids) for ids in got["prompt_ids"]]
    # llama.cpp (Q4_K_M) on the same token ids: the same letters, probabilities within bf16 rounding
    local = models.answerer
    for ids, p in zip(got["prompt_ids"], letters):
        with local._lock:
            lp = local._eval(list(ids))
        ref = dict(zip(LETTERS, _softmax([float(lp[i]) for i in got["letter_ids"]])))
        assert max(ref, key=ref.get) == max(p, key=p.get)
        assert max(abs(ref[L] - p[L]) for L in LETTERS) < 0.1, (ref, p)


def test_vllm_free_text_continuations_generation_and_yes_no(vllm_stage, models, vocab):
    got = vllm_stage("answer")
    local = models.answerer
    assert got["free_ids"] == [t for piece in FREE_PROMPT for t in vocab.encode(piece)]
    # option likelihood: each continuation's own tokens read from prompt_logprobs (empty: none asked)
    conts = got["continuations"]
    assert [len(c) for c in conts] == [min(8, len(vocab.encode(c))) for c in CONTINUATIONS]
    assert np.mean(conts[0]) > np.mean(conts[2])  # the stated warranty (36) over another (12)
    ref = local.continuation_logprobs(FREE_PROMPT, CONTINUATIONS, max_tokens=8)
    for a, b in zip(conts, ref):
        assert len(a) == len(b) and all(abs(x - y) < 0.5 for x, y in zip(a, b)), (a, b)
    # greedy generation, stopped before "\n"
    assert got["generated"].strip().startswith("36 місяців") and "\n" not in got["generated"]
    # yes/no from the first token's top log-probabilities: the same verdict as llama.cpp's, close in size
    assert got["yes_log_odds"] > 1.0
    assert got["yes_log_odds"] == pytest.approx(local.yes_log_odds(YES_PROMPT), abs=1.0)


def test_more_logprobs_than_vllm_returns_are_refused_with_a_clear_message(vllm_stage):
    got = vllm_stage("answer")
    assert "greater than max allowed: 20" in got["logprobs_21"]  # vLLM's own limit (max_logprobs)
    with pytest.raises(ValueError, match=r"answer_top_logprobs=21: vLLM returns at most max_logprobs=20"):
        load_settings("remote", answer_top_logprobs=21)
    assert load_settings("remote", answer_top_logprobs=20).remote.answer_top_logprobs == 20


def test_prompt_logprobs_over_a_long_prompt_are_refused_on_t4_profiles(vllm_stage, vocab):
    """vLLM computes full-vocabulary logits for every prompt token asked prompt_logprobs, outside its memory plan
    (~7.5 GiB at 8,192 tokens): the T4 profiles refuse such prompts before the engine sees them."""
    got = vllm_stage("answer")
    assert "74 tokens, over prompt_logprobs_max_tokens=20" in got["capped"] and "free_mode=generate" in got["capped"]
    from pipeline.errors import BackendUnsupported

    for name in ("t4x2", "t4x2-paper"):
        s = load_settings(name)
        assert s.remote.prompt_logprobs_max_tokens == 1024
        ans = VllmAnswerer(s, llm=object(), tokenizer=vocab)
        with pytest.raises(BackendUnsupported, match="prompt_logprobs_max_tokens=1024"):
            ans.continuation_logprobs(["Довгий текст. " * 600, "Відповідь:"], [" так"])
    assert load_settings("vllm-cpu").remote.prompt_logprobs_max_tokens == 0  # CPU memory: no such limit


def test_vllm_embedder_pools_normalised_vectors(vllm_stage, vocab):
    got = vllm_stage("embed")
    assert got["args"]["runner"] == "pooling" and got["args"]["convert"] == "embed"
    assert got["shape"] == [3, 1536] and np.allclose(got["norms"], 1.0, atol=1e-4)
    assert got["same_text"] == pytest.approx(1.0, abs=1e-4) and got["different_texts"] < 0.999
    # a query is the passage embedding of the prefixed query text
    assert got["query_prefix"] and got["query_is_prefixed_passage"] == pytest.approx(1.0, abs=1e-4)
    assert got["word_tokens"] == len(vocab.encode(" зволожувач")) > 1 and got["empty_shape"] == [0, 0]


def test_vllm_reranker_is_the_yes_no_classifier_of_the_answer_model(vllm_stage, models, vocab):
    got = vllm_stage("rerank")
    assert got["args"]["hf_overrides"] == {"architectures": ["Qwen2ForSequenceClassification"],
                                           "classifier_from_token": ["no", "yes"], "method": "from_2_way_softmax"}
    scores = got["scores"]
    assert [len(x) for x in scores] == [2, 1] and all(0.0 < x < 1.0 for g in scores for x in g)
    assert scores[0][0] > scores[0][1]  # the passage that answers above the one that does not
    # vLLM's classifier from the yes/no tokens is p(yes) = sigmoid(logit yes - logit no) at the last token:
    # llama.cpp on the same weights and the same prompt tokens
    yes, no = vocab.encode("yes")[0], vocab.encode("no")[0]
    local = models.answerer
    for ids_q, sc_q in zip(got["prompt_ids"], scores):
        for ids, sc in zip(ids_q, sc_q):
            with local._lock:
                lp = local._eval(list(ids))
            assert sc == pytest.approx(1 / (1 + math.exp(-(lp[yes] - lp[no]))), abs=0.1)
    # a document far over max_model_len (512 here) is cut to fit, and scored, not refused
    assert got["huge_prompt_tokens"] <= TEST_SETTINGS["rerank_max_len"] and 0.0 < got["huge_score"][0] < 1.0


def test_every_gpu_profiles_arguments_are_accepted_by_vllm(vllm_stage):
    """Each profile's ``vllm.LLM`` arguments are vLLM's ``EngineArgs``; its ``vllm serve`` command parses with
    vLLM's own parser to the same arguments; a misspelled argument or flag is refused by the same check."""
    got = vllm_stage("args")
    assert got["errors"] == {}
    assert sorted(got["checked"]) == sorted(f"{p}/{st}" for p in ("t4x2", "t4x2-paper", "vllm-cpu") for st in STAGES)
    assert len(got["bad_refused"]) == 2 and "bad_accepted" not in got and got["bad_flag"] == "refused"


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
                        ("--max-model-len", "8192"), ("--attention-backend", "TRITON_ATTN"), ("--runner", "generate"),
                        ("--served-model-name", "Qwen/Qwen3-14B-AWQ")):
        assert ans[ans.index(flag) + 1] == value
    assert "--quantization" not in ans  # vLLM reads the checkpoint's (awq_marlin on a T4)
    # booleans are vLLM's --flag / --no-flag pairs: False is said, not dropped
    assert "--no-enforce-eager" in ans and "--enforce-eager" not in ans
    assert "--enforce-eager" in serve_command(load_settings("t4x2", vllm_enforce_eager=True), "answer")
    # the remote profile points at those ports
    r = load_settings("remote")
    assert [r.roles.answer_url, r.roles.embed_url, r.roles.rerank_url] == [f"http://127.0.0.1:{PORTS[st]}/v1"
                                                         for st in ("answer", "embed", "rerank")]
    assert [r.roles.embed_model, r.roles.rerank_model, r.roles.answer_model] == [s.roles.embed_model, s.roles.rerank_model, s.roles.answer_model]


def test_vllm_on_cpu_takes_the_dtype_measured_faster_here_and_all_the_cores():
    """vllm-cpu's ``fastest`` dtype is measured in the interpreter that runs vLLM (bfloat16 is emulated, several
    times slower, on a CPU without AVX512_BF16 or AMX); its engines keep no core for vLLM's scheduler; the
    printed ``vllm serve`` commands carry that environment, a GPU profile's none."""
    import subprocess
    import sys

    from pipeline.backends.vllm_engine import cpu_env, fastest_cpu_dtype
    from pipeline.gpu.serve import serve_command
    from serving import VLLM_PYTHON, require_vllm

    require_vllm()
    s = load_settings("vllm-cpu")
    dtype = fastest_cpu_dtype(str(VLLM_PYTHON))
    assert dtype in ("bfloat16", "float32") and engine_args(s, "answer", str(VLLM_PYTHON))["dtype"] == dtype
    cmd = serve_command(s, "embed", python=str(VLLM_PYTHON))
    assert cmd[cmd.index("--dtype") + 1] == dtype
    assert engine_args(load_settings("vllm-cpu", vllm_dtype="bfloat16"), "answer")["dtype"] == "bfloat16"
    assert cpu_env(s) == {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    assert cpu_env(load_settings("t4x2")) == {}
    printed = subprocess.run([sys.executable, "-m", "pipeline.gpu.serve", "--profile", "vllm-cpu"], capture_output=True,
                             text=True, check=True).stdout.splitlines()
    assert len(printed) == 3 and all(line.startswith("env VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_NUM_OF_RESERVED_CPU=0 vllm serve ")
                                     for line in printed)
