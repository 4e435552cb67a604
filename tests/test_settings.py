import pytest

from pipeline.settings import PROFILES, load_settings


def test_cpu_is_the_default_profile():
    s = load_settings()
    assert s.profile == "cpu" and s.chunk_tokens == PROFILES["cpu"]["chunk_tokens"]


def test_environment_and_overrides_win(monkeypatch):
    monkeypatch.setenv("PDFQA_TOP_K_ANSWER", "3")
    monkeypatch.setenv("PDFQA_CHUNK_TOKENS", "200")
    s = load_settings("cpu")
    assert s.top_k_answer == 3 and s.chunk_tokens == 200
    assert load_settings("cpu", top_k_answer=1).top_k_answer == 1


def test_unknown_profile_and_bad_values_are_refused():
    with pytest.raises(ValueError, match="unknown profile"):
        load_settings("nope")
    with pytest.raises(ValueError):
        load_settings("cpu", retrieval="magic")


def test_fingerprint_follows_chunking_not_retrieval():
    a, b = load_settings(), load_settings(retrieval="bm25")
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != load_settings(use_prefix=False).fingerprint()
