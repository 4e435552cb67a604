import pytest

from pipeline.settings import PROFILES, load_settings, parse_overrides


def test_cpu_is_the_default_profile():
    s = load_settings()
    assert s.profile == "cpu" and PROFILES["cpu"] == {}  # the class defaults are the cpu profile's
    assert s.chunk_tokens == 320 and s.scorer == "listed" and s.distinct_pages


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


def test_one_view_per_model_role():
    s = load_settings("remote")
    assert s.role("embed") == ("remote", s.embed_model, "http://127.0.0.1:8001/v1", s.embed_gpu_memory, s.embed_max_len)
    assert s.role("answer").max_len == s.n_ctx and s.role("rerank").url == s.rerank_url
    with pytest.raises(ValueError, match="unknown role"):
        s.role("judge")


def test_web_app_settings_come_from_their_environment_names(monkeypatch):
    monkeypatch.setenv("PDFQA_SHARED_LIBRARY", "1")
    monkeypatch.setenv("PDFQA_MODEL_CONCURRENCY", "2")
    monkeypatch.setenv("PDFQA_SESSION_DAYS", "0.5")
    monkeypatch.setenv("PDFQA_MAX_PAGE_SESSIONS", "10")
    s = load_settings()
    assert (s.shared_library, s.model_concurrency, s.session_days, s.max_page_sessions) == (True, 2, 0.5, 10)
    assert (s.max_sessions, load_settings(shared_library=False).shared_library) == (200, False)


def test_set_pairs_are_parsed_once_for_every_command():
    assert parse_overrides(["top_k_answer=3", "query_instruction=a=b"]) == {"top_k_answer": "3",
                                                                             "query_instruction": "a=b"}
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        parse_overrides(["top_k_answer"])
def test_data_dir_defaults_to_a_spaces_persistent_storage(tmp_path, monkeypatch):
    from pathlib import Path

    from pipeline.settings import default_data_dir
    storage = tmp_path / "data"
    space = {"SPACE_ID": "someone/pdf-qa"}
    assert default_data_dir({}, storage) == Path("data")  # not a Space
    assert default_data_dir(space, storage) == Path("data")  # a Space without persistent storage
    storage.mkdir()
    assert default_data_dir(space, storage) == storage / "pdfqa"
    assert default_data_dir({}, storage) == Path("data")  # a /data on an ordinary machine is not taken
    # the environment variable and explicit settings win over the default
    monkeypatch.setenv("PDFQA_DATA_DIR", str(tmp_path / "mine"))
    assert load_settings().data_dir == tmp_path / "mine"
    monkeypatch.delenv("PDFQA_DATA_DIR")
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert load_settings().data_dir == Path("data")
    assert load_settings(data_dir=str(tmp_path)).data_dir == tmp_path
