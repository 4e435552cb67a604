import json
import os
from types import UnionType
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic import SecretStr

from pipeline.settings import (FIELD_GROUP, GROUPS, PROFILES, TOP_LEVEL, Settings, default, load_settings, nest,
                               parse_overrides, settings_from_record)


@pytest.fixture
def no_env(monkeypatch):
    """No ``PDFQA_`` setting in the environment (a developer's shell may set some)."""
    for k in list(os.environ):
        if k.startswith("PDFQA_") and k[len("PDFQA_"):].lower() in {*FIELD_GROUP, *TOP_LEVEL}:
            monkeypatch.delenv(k)


def test_every_setting_has_one_flat_name_and_one_group():
    names = [k for cls in GROUPS.values() for k in cls.model_fields]
    assert len(names) == len(set(names)) == len(FIELD_GROUP) > 100  # unique across the groups
    assert set(FIELD_GROUP) == set(names) and all(k in GROUPS[g].model_fields for k, g in FIELD_GROUP.items())
    # a group's own name is no setting's (its environment variable would be read for the whole group)
    assert not (set(GROUPS) | set(TOP_LEVEL)) & set(names) and set(TOP_LEVEL) == {"profile", "data_dir"}
    assert nest({"top_k_answer": 3, "chroma_url": "u", "profile": "cpu"}) == {
        "answer": {"top_k_answer": 3}, "store": {"chroma_url": "u"}, "profile": "cpu"}
    with pytest.raises(ValueError, match="unknown setting 'top_k'"):
        nest({"top_k": 3})


def test_cpu_is_the_default_profile(no_env):
    s = load_settings()
    assert s.profile == "cpu" and PROFILES["cpu"] == {}  # the class defaults are the cpu profile's
    assert s.chunking.chunk_tokens == 320 and s.answer.scorer == "listed" and s.answer.distinct_pages
    assert s.model_dump() == Settings().model_dump()
    assert all(getattr(getattr(s, g), k) == default(k) for k, g in FIELD_GROUP.items())
    assert s.flat() == {"profile": "cpu", "data_dir": s.data_dir, **{k: default(k) for k in FIELD_GROUP}}
    # the fitted lapse is the cpu answer model's (issue 44); the other answer models show their probabilities as scored
    assert s.answer.calibration_by_path == {"*": {"lapse": 0.10}}
    assert all(load_settings(p).answer.calibration_by_path == {} for p in PROFILES if p != "cpu")


def test_every_profile_names_known_settings():
    for name, values in PROFILES.items():
        s = load_settings(name)
        assert all(s.flat()[k] == v for k, v in values.items()), name


def _other(name: str) -> tuple[str, Any]:
    """A value unlike the default for a setting, as its environment variable says it, and as it is read."""
    d = default(name)
    ann = GROUPS[FIELD_GROUP[name]].model_fields[name].annotation
    kind = next(a for a in get_args(ann) if a is not type(None)) if get_origin(ann) is UnionType else ann
    if get_origin(kind) is Literal:
        v = next(a for a in get_args(kind) if a != d)
        return v, v
    if kind is bool:
        return ("0" if d else "1"), not d
    if kind is int:
        v = 1 if d is None else (d - 1 if d > 1 else d + 1)
        return str(v), v
    if kind is float:
        return str(d + 0.25), d + 0.25
    if kind is SecretStr:
        return "s3cret", SecretStr("s3cret")
    if get_origin(kind) is dict:  # any JSON object, or one of objects of numbers where the values are typed so
        typed = get_args(kind)[1:] and get_origin(get_args(kind)[1]) is dict
        return ('{"k": {"x": 0.5}}', {"k": {"x": 0.5}}) if typed else ('{"k": [1, "x"]}', {"k": [1, "x"]})
    assert kind is str, (name, ann)
    return "other", "other"


def test_each_flat_environment_variable_reaches_its_group(monkeypatch, no_env):
    expected = {}
    for name in FIELD_GROUP:
        text, expected[name] = _other(name)
        monkeypatch.setenv(f"PDFQA_{name.upper()}", text)
    for s in (load_settings("cpu"), Settings()):
        for name, g in FIELD_GROUP.items():
            assert getattr(getattr(s, g), name) == expected[name], name
    monkeypatch.setenv("PDFQA_PROFILE", "remote")
    assert load_settings().profile == "remote"


def test_profile_then_environment_then_overrides(monkeypatch, no_env):
    t4 = load_settings("t4x2")  # the profile over the class defaults: an int, a bool, a dict
    assert (t4.answer.top_k_answer, t4.answer.think_block) == (3, True)
    assert load_settings("vllm-cpu").vllm.vllm_rerank_overrides["method"] == "from_2_way_softmax"
    monkeypatch.setenv("PDFQA_TOP_K_ANSWER", "5")
    monkeypatch.setenv("PDFQA_THINK_BLOCK", "false")
    monkeypatch.setenv("PDFQA_VLLM_RERANK_OVERRIDES", '{"method": "mine"}')
    env = load_settings("t4x2")  # the environment over the profile
    assert (env.answer.top_k_answer, env.answer.think_block, env.answer.scorer) == (5, False, "letter")
    assert load_settings("vllm-cpu").vllm.vllm_rerank_overrides == {"method": "mine"}
    over = load_settings("t4x2", top_k_answer=7, think_block=True, vllm_rerank_overrides={"method": "set"})
    assert (over.answer.top_k_answer, over.answer.think_block, over.vllm.vllm_rerank_overrides) == (
        7, True, {"method": "set"})  # explicit overrides over the environment
    assert load_settings("t4x2", top_k_answer=None).answer.top_k_answer == 5  # None: not given


def test_environment_and_overrides_win(monkeypatch):
    monkeypatch.setenv("PDFQA_TOP_K_ANSWER", "3")
    monkeypatch.setenv("PDFQA_CHUNK_TOKENS", "200")
    s = load_settings("cpu")
    assert s.answer.top_k_answer == 3 and s.chunking.chunk_tokens == 200
    assert load_settings("cpu", top_k_answer=1).answer.top_k_answer == 1


def test_unknown_profile_and_bad_values_are_refused():
    with pytest.raises(ValueError, match="unknown profile"):
        load_settings("nope")
    with pytest.raises(ValueError):
        load_settings("cpu", retrieval="magic")


def test_a_changed_copy_by_flat_names():
    s = load_settings()
    t = s.with_(top_k_answer="3", free_verify=False, data_dir="elsewhere")
    assert (t.answer.top_k_answer, t.free.free_verify, str(t.data_dir)) == (3, False, "elsewhere")
    assert (s.answer.top_k_answer, s.free.free_verify) == (2, True) and t.chunking == s.chunking
    with pytest.raises(ValueError):
        s.with_(retrieval="magic")
    with pytest.raises(ValueError, match="unknown setting"):
        s.with_(top_k=3)


def test_recorded_settings_load_grouped_or_flat(monkeypatch):
    s = load_settings("t4x2", top_k_answer=4, data_dir="runs")
    grouped = json.loads(s.model_dump_json())  # as metrics.json records them
    assert grouped["answer"]["top_k_answer"] == 4
    assert settings_from_record(grouped).model_dump() == s.model_dump()
    # before the groups a run recorded them flat, with settings since removed and the key masked
    flat = {**json.loads(json.dumps(s.flat(), default=str)), "api_key": "**********", "gone_setting": 1}
    assert settings_from_record(flat).model_dump() == s.model_dump()
    # what a record lacks is the class default, not the environment's
    monkeypatch.setenv("PDFQA_TOP_K_ANSWER", "9")
    assert settings_from_record({"profile": "cpu", "scorer": "letter"}).answer.top_k_answer == 2
    assert settings_from_record({"answer": {"scorer": "letter"}}).answer.top_k_answer == 2


def test_fingerprint_follows_chunking_not_retrieval():
    a, b = load_settings(), load_settings(retrieval="bm25")
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != load_settings(use_prefix=False).fingerprint()


def test_one_view_per_model_role():
    s = load_settings("remote")
    assert s.role("embed") == ("remote", s.roles.embed_model, "http://127.0.0.1:8001/v1", s.roles.embed_gpu_memory, s.roles.embed_max_len)
    assert s.role("answer").max_len == s.answer.n_ctx and s.role("rerank").url == s.roles.rerank_url
    with pytest.raises(ValueError, match="unknown role"):
        s.role("judge")


def test_web_app_settings_come_from_their_environment_names(monkeypatch):
    monkeypatch.setenv("PDFQA_SHARED_LIBRARY", "1")
    monkeypatch.setenv("PDFQA_MODEL_CONCURRENCY", "2")
    monkeypatch.setenv("PDFQA_SESSION_DAYS", "0.5")
    monkeypatch.setenv("PDFQA_MAX_PAGE_SESSIONS", "10")
    s = load_settings()
    assert (s.web.shared_library, s.web.model_concurrency, s.web.session_days, s.web.max_page_sessions) == (True, 2, 0.5, 10)
    assert (s.web.max_sessions, load_settings(shared_library=False).web.shared_library) == (200, False)


def test_set_pairs_are_parsed_once_for_every_command():
    assert parse_overrides(["top_k_answer=3", "query_instruction=a=b"]) == {"top_k_answer": "3",
                                                                             "query_instruction": "a=b"}
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        parse_overrides(["top_k_answer"])
    # their flat names reach the groups, typed
    s = load_settings("cpu", **parse_overrides(["top_k_answer=3", "free_verify=false", "page_scope=all"]))
    assert (s.answer.top_k_answer, s.free.free_verify, s.pages.page_scope) == (3, False, "all")
    with pytest.raises(ValueError, match="unknown setting 'top_k'"):
        load_settings("cpu", **parse_overrides(["top_k=3"]))
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
