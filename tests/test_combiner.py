"""The combiner's arithmetic (no model): conditional logit, temperature, ECE, features, the fitted file."""
import numpy as np

from pipeline.answering import calibration as cb
from pipeline.evaluation import scoring
from pipeline.answering.features import letter_debiased, shifted_tail
from pipeline.types import Question


def synthetic(n=400, seed=0):
    rng = np.random.default_rng(seed)
    w = np.array([2.0, -1.0, 0.5])
    X = rng.normal(size=(n, 6, 3))
    M = np.ones((n, 6), bool)
    M[:20, 5] = False  # some questions with an empty option F
    y = np.array([rng.choice(6, p=cb.softmax_masked(x @ w, m)) for x, m in zip(X, M)])
    return X, y, M, w


def test_conditional_logit_recovers_shared_weights():
    X, y, M, w = synthetic()
    got = cb.fit_clogit(X, y, M, l2=0.1)
    assert np.allclose(got, w, atol=0.35), got


def test_strong_regularisation_shrinks_weights():
    X, y, M, _ = synthetic()
    assert np.abs(cb.fit_clogit(X, y, M, l2=1e4)).max() < 0.1


def test_temperature_undoes_an_overconfident_scale():
    X, y, M, w = synthetic()
    T = cb.fit_temperature(X @ w * 4, y, M)
    assert 3.0 < T < 5.5


def test_masked_option_gets_no_probability():
    p = cb.softmax_masked(np.array([1.0, 2, 3, 4, 5, 99]), np.array([1, 1, 1, 1, 1, 0], bool))
    assert p[5] == 0 and np.isclose(p.sum(), 1)


def test_ece():
    conf = np.full(100, 0.8)
    assert np.isclose(scoring.ece(conf, np.r_[np.ones(80), np.zeros(20)]), 0.0)
    assert np.isclose(scoring.ece(conf, np.ones(100)), 0.2)


def test_ece_by_chance_tells_noise_from_miscalibration():
    rng = np.random.default_rng(1)
    conf = rng.uniform(0.3, 1.0, 170)
    calibrated = (rng.random(170) < conf).astype(float)  # right exactly as often as it says
    chance, p = scoring.ece_by_chance(conf, calibrated)
    assert 0.03 < chance < 0.10  # 170 questions in 10 bins: a calibrated answerer's ECE is not 0
    assert p > 0.05
    chance, p = scoring.ece_by_chance(np.clip(conf + 0.2, 0, 1), calibrated)  # the same answers, 20 points too sure
    assert p < 0.01
    assert scoring.ece_by_chance(conf, calibrated) == scoring.ece_by_chance(conf, calibrated)  # fixed seed


def test_shifted_letters_map_back_to_options():
    q = Question("1", "?", list("abcdef"))
    tail, order = shifted_tail(q, 2)
    assert "C. a" in tail and "A. e" in tail and order[2] == 0
    # position log-probs that favour position C under shift 2 favour option a (index 0)
    lp = np.log(np.full(6, 0.02))
    lp[2] = np.log(0.9)
    assert int(np.argmax(letter_debiased({"2": lp.tolist()}))) == 0
    # a constant position prior cancels out
    assert np.allclose(letter_debiased({"0": lp.tolist()}, prior=lp), 0)


def test_fitted_weights_file_is_usable():
    m = cb.load_weights()
    assert len(m["features"]) == len(m["weights"]) == len(m["mean"]) == len(m["scale"])
    assert m["temperature"] > 0 and set(m["features"]) <= set(cb.GROUPS_FOR)
    if m.get("flag"):
        assert len(m["flag"]["features"]) == len(m["flag"]["weights"]) and 0 < m["flag"]["threshold"] < 1


def test_flag_meets_a_word_form_the_lemmatiser_reads_first_as_another_word():
    """"годині" is read first as a plural-only noun ("годині"), only then as година: with the first reading alone
    the museum question's word was "in no document" beside a page holding "години", and the flag fired on a
    question whose document was there (the browser test's museum leaflet). Every reading counts."""
    from pipeline.answering.flag import flag_features
    from pipeline.text import content_terms
    from pipeline.types import Candidate, Chunk

    page = "Музей відчиняється щодня о 10:00. Каса припиняє продаж квитків за пів години до закриття."

    class Library:  # what flag_features reads of a library: its document frequencies and a document's terms
        def doc_freq(self):
            return {t: 1 for t in content_terms(f"Правила відвідування музею {page}")}, 1

        def doc_terms(self, doc_hash):
            return frozenset(content_terms(f"Правила відвідування музею {page}"))

    c = Candidate(Chunk("c0", "h", "muzei.pdf", 0, "Графік роботи", page, "Правила відвідування музею", [(1, 0, 9)]))
    q = Question("q", "О котрій годині щодня відчиняється музей?", ["О 8:00", "О 9:00", "О 10:00", "О 11:00",
                                                                    "О 12:00", "О 7:00"])
    f = flag_features(Library(), q, [c], [c])
    assert f["absent_words"] == [] and f["rare_absent"] == 0.0 and f["q_cov"] == 1.0, f


def test_flag_terms_meet_across_inflections_and_skip_question_words():
    """A question's "одна година" must meet a page's "однієї години" (lemmas, not word prefixes), and its
    interrogatives, which no document needs to contain, are not counted as missing evidence."""
    from pipeline.answering.flag import _terms

    q = _terms("Скільки коштує одна година паркування?")
    page = _terms("Вартість однієї години паркування становить 20 гривень. Доба паркування коштує 150 гривень.")
    assert q <= page, q - page
    assert "скільки" not in q and not any(t.isdigit() for t in page)
    # names the lemmatiser does not know get a guessed lemma per case ("Фервексу" → фервексу, "Ретаболілу" →
    # ретаболілий): a question naming a medicine in the genitive still meets the leaflet's nominative
    assert _terms("Які побічні ефекти фервексу і ретаболілу?") <= _terms("Фервекс і Ретаболіл: побічні ефекти")
