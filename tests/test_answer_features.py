"""Per-option features and the calibrated scorer, with the real shipped model."""
import numpy as np

from pipeline.answering import calibration as combiner
from pipeline.answering.answer import score_options
from pipeline.answering.features import letter_debiased, llm_features, support_features
from pipeline.settings import load_settings
from pipeline.types import Candidate, Chunk, Question


def cand(body, rank=1):
    return Candidate(Chunk(f"d:{rank}", "d", "d.pdf", rank, "Розділ", body, "Інструкція", [(1, 0, len(body))]), {}, rank)


Q = Question("1", "Якого кольору дах ратуші в місті Вербівка?",
             ["синього", "червоного", "зеленого", "чорного", "жовтого", "білого"])
TEXT = "Ратуша міста Вербівка має жовтий дах, який видно з усіх пагорбів довкола."

# The right option is worded rarely ("щоквартально" for the text's "раз на квартал"); the distractors are
# common words. Measured: option likelihood alone picks "ніколи" here (the commonest wording).
RARE = Question("2", "Як часто замінюють фільтр очищувача «Бриз-4»?",
                ["щодня", "щотижня", "щоквартально", "щороку", "ніколи", "після кожного вмикання"])
RARE_TEXT = "Фільтр очищувача «Бриз-4» замінюють раз на квартал; корпус протирають сухою серветкою."


def test_every_group_points_at_a_stated_fact(models):
    ans = models.answerer
    with ans.exclusive():
        f, secs = llm_features(ans, Q, [cand(TEXT)], shifts=(0, 3))
    assert {"neutral", "prefix", "option", "verify", "letter"} <= set(secs)
    assert int(np.argmax(f["option_mean"])) == 4
    assert int(np.argmax(letter_debiased(f["letter_pos"]))) == 4  # both shifts, mapped back to the options
    assert int(np.argmax(f["verify"])) == 4
    assert len(f["neutral_sum"]) == 6 and all(x < 0 for x in f["neutral_sum"])
    s = support_features(None, Q, [cand(TEXT)])
    assert int(np.argmax(s["support_cov"])) == 4  # "жовтого" and "жовтий" share a stem


CALIBRATED = load_settings(scorer="calibrated")


def test_pmi_finds_a_rarely_worded_answer_that_option_likelihood_misses(models):
    """The surface-form correction itself. (The combination fitted on the 170 questions of ../shared/unlp
    weighs option likelihood ~3x PMI and does not rescue this case: bench/answer_quality.md.)"""
    ans = models.answerer
    with ans.exclusive():
        f, _ = llm_features(ans, RARE, [cand(RARE_TEXT)], groups=("neutral", "option"))
    feats = combiner.option_features(f)
    assert int(np.argmax(feats["option"])) == 4  # "ніколи": the commonest wording
    assert int(np.argmax(feats["pmi"])) == 2 and int(np.argmax(feats["pmi_sum"])) == 2  # "щоквартально"
    s = score_options(ans, RARE, [cand(RARE_TEXT)], CALIBRATED)
    assert np.isclose(sum(s.probabilities.values()), 1)


def test_calibrated_probabilities_are_not_one_by_construction(models):
    s = score_options(models.answerer, Q, [cand(TEXT)], CALIBRATED)
    p = np.array(list(s.probabilities.values()))
    assert max(s.probabilities, key=s.probabilities.get) == "E"
    assert p.max() < 0.999 and p.min() > 0  # a fitted temperature, not a near-argmax softmax


def test_calibrated_scorer_ignores_an_empty_option(models):
    q = Question("3", Q.text, ["синього", "", "зеленого", "", "жовтого", ""])
    s = score_options(models.answerer, q, [cand(TEXT)], CALIBRATED)
    assert s.probabilities["B"] == 0 and s.probabilities["D"] == 0 and max(s.probabilities, key=s.probabilities.get) == "E"
