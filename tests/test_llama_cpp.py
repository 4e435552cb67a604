"""The llama.cpp answerer's scorers (``pipeline.backends.llama_cpp``), with the real shipped model."""
import numpy as np
import pytest

from pipeline.prompts import OPTION_TAIL, letter_tail, shared_prompt
from pipeline.types import LETTERS, Candidate, Chunk, Question


def cand(body, rank=1):
    return Candidate(Chunk(f"d:{rank}", "d", "d.pdf", rank, "Розділ", body, "Інструкція", [(1, 0, len(body))]), {}, rank)


Q = Question("1", "Якого кольору дах ратуші в місті Вербівка?",
             ["синього", "червоного", "зеленого", "чорного", "жовтого", "білого"])
TEXT = "Ратуша міста Вербівка має жовтий дах, який видно з усіх пагорбів довкола."


def test_letters_are_single_tokens_and_prompts_are_ukrainian(models):
    ans = models.answerer
    assert len(set(ans.letter_ids)) == 6
    p = shared_prompt(Q, ["текст"])
    assert "Запитання:" in p and "[Фрагмент 1]" in p
    assert all(f"{L}. " in letter_tail(Q) for L in LETTERS)


def test_both_scorers_find_a_stated_fact(models):
    s = models.answerer.score(Q, [cand(TEXT)], scorer="combined")
    assert max(s.option, key=s.option.get) == "E"
    assert max(s.letter, key=s.letter.get) == "E"
    assert np.isclose(sum(s.probabilities.values()), 1)


def test_prompt_is_cut_to_fit_the_context(models):
    ans = models.answerer
    huge = "Довгий текст без потрібної відповіді. " * 3000
    toks = ans.prompt_tokens(Q, [TEXT, huge])
    assert len(toks) < ans.settings.answer.n_ctx - len(ans._tok(letter_tail(Q), special=True))
    s = ans.score(Q, [cand(TEXT), cand(huge, 2)])
    assert max(s.option, key=s.option.get) == "E"


def test_empty_option_never_wins(models):
    q = Question("2", Q.text, ["синього", "", "зеленого", "", "жовтого", ""])
    s = models.answerer.score(q, [cand(TEXT)])
    assert s.option["B"] < 1e-6 and s.option["D"] < 1e-6 and max(s.option, key=s.option.get) == "E"


def test_extra_buffers_follow_the_setting_the_cpu_and_the_build():
    from pipeline.backends.llama_cpp import amx_built, amx_reported, use_extra_buffers

    assert use_extra_buffers("on") is True and use_extra_buffers("off") is False
    assert use_extra_buffers("auto") is not (amx_reported() and amx_built())


# ---- the free-text interface (base.Answerer), on the same model and cache ------------------------------------
FACT = shared_prompt(Q, [f"Інструкція — Розділ\n{TEXT}"])
YES_TAIL = ("\n\nЧи правда, що дах ратуші жовтий? Відповідай лише «так» або «ні»."
            "<|im_end|>\n<|im_start|>assistant\nВідповідь:")
NO_TAIL = YES_TAIL.replace("жовтий", "зелений")
ANSWER_TAIL = "<|im_end|>\n<|im_start|>assistant\nВідповідь:"


def test_continuations_are_the_option_scorers_numbers(models):
    ans = models.answerer
    s = ans.score(Q, [cand(TEXT)], scorer="option")
    lps = ans.continuation_logprobs([FACT, OPTION_TAIL], [" " + o for o in Q.options])
    z = np.array([np.mean(x) for x in lps]) / ans.settings.answer.option_temperature
    assert np.allclose(np.exp(z - z.max()) / np.exp(z - z.max()).sum(), [s.option[L] for L in LETTERS], atol=1e-9)
    short = ans.continuation_logprobs([FACT, OPTION_TAIL], [" жовтого кольору", ""], max_tokens=1)
    assert len(short[0]) == 1 and short[1] == []
    assert all(x < 0 for x in lps[4]) and len(lps[4]) == ans.count_tokens(" жовтого")


def test_generation_is_greedy_and_stops(models):
    ans = models.answerer
    text = ans.generate([FACT, ANSWER_TAIL], 20, stop=["\n"])
    assert "жовт" in text.lower() and "\n" not in text
    one = ans.generate([FACT, ANSWER_TAIL], 1)
    assert text.startswith(one) and ans.count_tokens(one) == 1
    # the same after continuations were read on that prompt, and after another prompt (cache state kept right)
    ans.continuation_logprobs([FACT, ANSWER_TAIL], [" синього", " жовтого кольору"])
    assert ans.generate([FACT, ANSWER_TAIL], 20, stop=["\n"]) == text
    ans.generate([FACT, YES_TAIL], 3)
    assert ans.generate([FACT, ANSWER_TAIL], 20, stop=["\n"]) == text


def test_yes_probability_reads_the_stated_fact(models):
    ans = models.answerer
    p_yes = ans.yes_probability([FACT, YES_TAIL])
    d = ans.yes_log_odds([FACT, YES_TAIL])  # the same prompt again: its kept log-probabilities
    assert p_yes == 1 / (1 + np.exp(-d))
    assert p_yes > 0.5 > ans.yes_probability([FACT, NO_TAIL])
    assert ans.yes_log_odds([FACT, YES_TAIL], yes=("Так",), no=("Ні",)) != d  # other words, other tokens


def test_forget_drops_the_cached_prompt_and_the_same_numbers_come_back(models):
    ans = models.answerer
    d = ans.yes_log_odds([FACT, YES_TAIL])
    assert ans.llm.n_tokens > 0
    ans.forget()
    assert ans.llm.n_tokens == 0 and ans._last is None
    assert ans.yes_log_odds([FACT, YES_TAIL]) == pytest.approx(d, abs=1e-4)  # read again from the start


def test_a_backend_without_free_text_says_so():
    from pipeline.backends.base import Answerer
    from pipeline.errors import BackendError

    class LettersOnly(Answerer):  # a backend that implements only the six probabilities
        def score(self, q, evidence, scorer=None):
            raise NotImplementedError

    a = LettersOnly()
    for call in (lambda: a.generate("x", 5), lambda: a.continuation_logprobs("x", [" y"]),
                 lambda: a.yes_probability("x"), lambda: a.count_tokens("x")):
        with pytest.raises(BackendError, match=r"this answer backend \(LettersOnly\) cannot"):
            call()
    a.prefill("x")  # hints: nothing to do
    with a.exclusive():
        pass


def test_listed_options_scorer_reads_all_six_before_scoring(models):
    """The listed scorer: the six options written out (no letters) before each is scored, less each option's
    worth without passages. It finds the stated fact, ignores an empty option and, unlike the plain option
    likelihood (tests/test_answer_features.py), picks the rarely worded right option over the commonest wording."""
    from pipeline.prompts import option_tail
    from tests.test_answer_features import RARE, RARE_TEXT

    ans = models.answerer
    tail = option_tail(Q, listed=True)
    assert all(f"- {o}\n" in tail for o in Q.options) and tail.endswith(OPTION_TAIL) and ". синього" not in tail
    s = ans.score(Q, [cand(TEXT)], scorer="listed")
    assert max(s.probabilities, key=s.probabilities.get) == "E" and np.isclose(sum(s.probabilities.values()), 1)
    blank = ans.score(Question("2", Q.text, ["синього", "", "зеленого", "", "жовтого", ""]), [cand(TEXT)], "listed")
    assert blank.option["B"] < 1e-6 and max(blank.option, key=blank.option.get) == "E"
    rare = ans.score(RARE, [cand(RARE_TEXT)], scorer="listed")
    assert max(rare.probabilities, key=rare.probabilities.get) == "C"  # "щоквартально"


def test_listed_scorer_with_prior_weight_holds_in_every_order_of_the_options(models):
    """``listed_prior_weight`` 1: each option's mean log-probability less the same after the question and the
    options without passages (a second context; features in the trace). A one-sentence fact is then answered
    the same in all six cyclic orders of the options; without it (weight 0, the default: more right answers
    on ../shared/unlp) the answer here follows the order (measured: "щодня" in 4 of the 6)."""
    from pipeline.backends.llama_cpp import LlamaCppAnswerer
    from tests.orders import CLEANING, CLEANING_TEXT, in_every_order, picked

    base = models.answerer
    ans = LlamaCppAnswerer(base.model_path, base.settings.with_(listed_prior_weight=1.0))
    picks, plain = [], []
    for shown, s, pick in in_every_order(CLEANING, lambda x: ans.score(x, [cand(CLEANING_TEXT)], "listed")):
        picks.append(pick)
        f = s.features
        assert len(f["listed_sum"]) == len(f["listed_prior_sum"]) == len(f["listed_ntok"]) == 6
        w0 = base.score(shown, [cand(CLEANING_TEXT)], "listed")
        assert "listed_prior_sum" not in w0.features and w0.features["listed_sum"] == pytest.approx(f["listed_sum"], abs=0.05)
        plain.append(picked(shown, w0))
    assert picks == ["щотижня"] * 6, picks
    assert plain.count("щотижня") < 6, plain


# ---- the model's format (shipped.py) and the batched continuations (issue 34) ------------------------------------
def test_the_cpu_flags_and_amx_are_read_from_cpuinfo(tmp_path):
    """The flags the answer path's record is keyed by, and the AMX route's condition (CPU and build)."""
    from pipeline.backends.answer_path import amx_build, amx_cpu, cpu_model, simd_flags
    from pipeline.backends.shipped import cpu_flags

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"
                    "model name\t: Intel(R) Xeon(R) Platinum 8581C\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 "
                    "avx512_vnni amx_bf16 amx_tile amx_int8\n\nprocessor\t: 1\nmodel name\t: other\n")
    flags = cpu_flags(info)
    assert {"avx512_bf16", "avx2", "amx_tile"} <= flags and cpu_flags(tmp_path / "none") == set()
    assert cpu_model(info) == "Intel(R) Xeon(R) Platinum 8581C (family 6 model 207)"
    assert simd_flags(flags) == ["amx_bf16", "amx_int8", "amx_tile", "avx2", "avx512_bf16", "avx512_vnni", "avx512f"]
    assert amx_cpu(flags) and not amx_cpu({"avx2", "amx_bf16"})
    assert amx_build("CPU : SSE3 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |")
    assert not amx_build("CPU : SSE3 = 1 | AVX2 = 1 | REPACK = 1 |")


def test_bf16_is_converted_once_from_the_shipped_file():
    import llama_cpp

    from pipeline.backends.shipped import format_file, format_ready, shipped_gguf

    path, fmt = format_file("bf16"), "bf16"
    assert format_ready("bf16")
    assert fmt == "bf16" and path.parent == shipped_gguf().parent and path != shipped_gguf()
    assert path.stat().st_size > 2.5 * shipped_gguf().stat().st_size  # 2 bytes a weight against ~0.6
    stamp = path.stat().st_mtime_ns
    assert format_file("bf16") == path and path.stat().st_mtime_ns == stamp  # kept, not converted again
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    m = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    buf = llama_cpp.ctypes.create_string_buffer(32)
    llama_cpp.llama_model_meta_val_str(m, b"general.file_type", buf, 32)
    llama_cpp.llama_model_free(m)
    assert int(buf.value) == llama_cpp.LLAMA_FTYPE_MOSTLY_BF16
    assert format_file("q4_k_m") == shipped_gguf()


def test_batched_continuations_are_the_one_by_one_numbers(models):
    ans = models.answerer
    conts = [" " + o for o in Q.options] + ["", " жовтого кольору, як сказано у фрагменті"]
    ans._batched = True
    together = ans.continuation_logprobs([FACT, OPTION_TAIL], conts)
    ans._batched = False
    try:
        apart = ans.continuation_logprobs([FACT, OPTION_TAIL], conts)
    finally:
        ans._batched = True
    assert [len(x) for x in together] == [len(x) for x in apart] and together[6] == []
    # the same numbers up to the kernels' rounding: a batch of 30 tokens and one of 3 take different matrix
    # kernels. BF16 (AVX512_BF16) agrees within 0.05 a token; the shipped Q4_K_M on AVX2 (AMD EPYC Zen 3,
    # 2026-12-07) within 0.3 a token, 0.12 on an option's mean log-probability (what the scorer reads), the same
    # option first
    gap = 0.05 if ans.model_format == "bf16" else 0.35
    assert max(abs(a - b) for x, y in zip(together, apart) for a, b in zip(x, y)) < gap
    means = [(np.mean(x), np.mean(y)) for x, y in zip(together[:6], apart[:6])]
    assert max(abs(a - b) for a, b in means) < gap / 2
    assert np.argmax([a for a, _ in means]) == np.argmax([b for _, b in means]) == 4  # жовтого, as the fact says
    # the cache is the prompt's again: the next call on it reads nothing new and gives the same numbers
    assert ans.llm.n_tokens == len(ans._prompt([FACT, OPTION_TAIL]))
    assert ans.continuation_logprobs([FACT, OPTION_TAIL], conts) == together
