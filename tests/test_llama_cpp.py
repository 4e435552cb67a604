"""The llama.cpp answerer's scorers (``pipeline.backends.llama_cpp``), with the real shipped model."""
import numpy as np

from pipeline.prompts import letter_tail, shared_prompt
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
    assert len(toks) < ans.settings.n_ctx - len(ans._tok(letter_tail(Q), special=True))
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
