"""The answer path chosen by measuring on this machine (``pipeline.backends.answer_path``, issue 44).

The choice runs on this machine's real llama.cpp build: each candidate in a child process, timed for about a
second here (the set-up takes a few seconds each); no timing is asserted (speed claims live in
``bench.answer_speed``). A candidate made to crash (``PDFQA_PROBE_CRASH``: its child raises SIGILL after loading,
as llama.cpp's AMX path did) is skipped with its reason, and this process goes on.
"""
import os

import pytest

from pipeline.backends import answer_path as ap
from pipeline.settings import load_settings


@pytest.fixture
def record(tmp_path, monkeypatch):
    """The record written to a file of this test's own (the model files stay where they are)."""
    f = tmp_path / "answer-paths.json"
    monkeypatch.setattr(ap, "record_file", lambda: f)
    return f


def test_the_choice_runs_on_this_build_and_skips_a_crashing_path(record, monkeypatch):
    monkeypatch.setenv("PDFQA_PROBE_CRASH", "q4_k_m/extra")
    s = load_settings().with_(answer_format="auto", llama_extra_buffers="auto", answer_path_formats="q4_k_m",
                              answer_path_seconds=1.0)
    pid = os.getpid()
    c = ap.answer_path(s)
    assert os.getpid() == pid  # still here
    rec = ap.read_record(ap.machine_key(ap.machine()))
    by = {r["path"]: r for r in rec["candidates"]}
    assert set(by) == {"q4_k_m/extra", "q4_k_m/plain"}
    assert by["q4_k_m/extra"]["status"] == "crashed: killed by SIGILL"
    plain = by["q4_k_m/plain"]
    assert plain["status"] == "ran" and plain["tokens_per_s"] > 0 and plain["runs"] >= 1 and plain["peak_rss_mb"] > 0
    assert plain["letters"] == ap.CHECK_GOLD  # the fixed check: two stated facts, answered right
    assert "race" not in plain  # one path ran: nothing to time in turns
    assert c["path"] == "q4_k_m/plain" and c["format"] == "q4_k_m" and c["extra"] is False
    assert c["why"].startswith("measured: ") and "1 that passed the check (2 tried)" in c["why"]
    assert any("q4_k_m/extra: crashed: killed by SIGILL" == x for x in c["candidates"])
    assert rec["machine"]["cpu"] == ap.cpu_model() and rec["machine"]["system_info"] == ap.system_info()

    # once measured, read: nothing runs again for this machine and build
    monkeypatch.setattr(ap, "probe_path", lambda *a, **k: pytest.fail("measured again"))
    assert ap.answer_path(s)["path"] == "q4_k_m/plain"
    # the note the about line and metrics.json show
    note = ap.answer_model_note(s)
    assert note["model"] == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" and note["tokens_per_s"] == c["tokens_per_s"]
    assert note["cpu_kernels"] == "native build"  # the set-up's build: its CPU backend linked in (ggml_cpu)
    # a forced format and buffers are taken as they are, without measuring
    forced = ap.answer_path(s.with_(answer_format="bf16", llama_extra_buffers="off"))
    assert forced == {"path": "bf16/plain", "format": "bf16", "extra": False,
                      "why": "set by answer_format and llama_extra_buffers"}


@pytest.mark.skipif(not (ap.amx_cpu() and ap.amx_build()), reason="needs a CPU with AMX and a llama.cpp built for it")
def test_the_amx_route_runs_and_answers_the_check_on_this_amx_machine(record):
    """Where the CPU and this build have AMX, llama.cpp's AMX tiles answer (issue 44: with its tile configuration
    kept by the set-up's -fno-dse they had died with SIGILL at ``tilezero``): Q8_0 with the extra buffers, and
    the shipped Q4_K_M with them, run in their child and give the check's known letters."""
    s = load_settings().with_(answer_format="auto", llama_extra_buffers="auto", answer_path_formats="q4_k_m,q8_0",
                              answer_path_seconds=1.0)
    assert {"q8_0/extra", "q4_k_m/extra"} <= {p.name for p in ap.candidates(s)}
    for name in ("q8_0/extra", "q4_k_m/extra"):
        r = ap.probe_path(ap.AnswerPath.parse(name), 0)
        assert r["status"] == "ran" and r["letters"] == ap.CHECK_GOLD and r["tokens_per_s"] > 0, r
        assert ap.buffers_label(True, ap.machine()) == "AMX tiles + repacked layouts"


def test_the_paths_that_ran_are_timed_in_turns():
    """The paths that ran alone and passed the check are loaded together in one child and timed in turns, so that
    the machine's other work weighs on each alike (this machine's real build; no figure asserted)."""
    res = [ran("q4_k_m/plain", 50.0, 1400), ran("q4_k_m/extra", 40.0, 2000)]
    assert ap.race_paths(res, 0) == ["q4_k_m/plain", "q4_k_m/extra"]
    for r in res:
        assert r["tokens_per_s"] > 0 and r["race_runs"] >= 1 and r["alone_tokens_per_s"] in (50.0, 40.0)
    assert res[0]["race"] == "timed in turns with q4_k_m/extra"


def ran(path, tps, mb, letters="EC"):
    return {"path": path, "status": "ran", "tokens_per_s": tps, "peak_rss_mb": mb, "letters": letters,
            "format": path.split("/")[0], "extra": path.endswith("/extra")}


def test_the_rule_fastest_then_lighter_and_the_check():
    """The rule on given figures (the real ones are the test above's and the benchmark's)."""
    pick, why = ap.choose([ran("q4_k_m/plain", 100, 1500), ran("bf16/extra", 103, 4300), ran("q8_0/extra", 90, 2100)])
    assert pick["path"] == "q4_k_m/plain" and "within 5% of the fastest and the lightest" in why
    pick, why = ap.choose([ran("q4_k_m/plain", 100, 1500), ran("bf16/extra", 120, 4300)])
    assert pick["path"] == "bf16/extra" and "the fastest of 2" in why
    # letters unlike the reference's: left out with its reason
    res = [ran("q4_k_m/plain", 100, 1500, "EC"), ran("q4_k_m/extra", 200, 1400, "AC")]
    pick, _ = ap.choose(res)
    assert pick["path"] == "q4_k_m/plain" and "differ from the reference's EC" in res[1]["reason"]
    # without the reference, the check's known answers decide
    pick, _ = ap.choose([ran("bf16/plain", 50, 4000, "EE"), ran("bf16/extra", 40, 4000)])
    assert pick["path"] == "bf16/extra"
    pick, why = ap.choose([{"path": "q4_k_m/extra", "status": "crashed: killed by SIGILL"}])
    assert pick is None and "q4_k_m/extra crashed: killed by SIGILL" in why
    pick, why = ap.choose([ran("q4_k_m/plain", 100, 1500), {"path": "bf16/plain", "status": "not tried: no AVX512_BF16"}])
    assert pick["path"] == "q4_k_m/plain" and "the fastest of 1 that passed the check (1 tried)" in why


def test_candidates_follow_the_settings():
    s = load_settings().with_(answer_format="auto", llama_extra_buffers="auto", answer_path_formats="q4_k_m,q8_0,bf16")
    # x86 without AMX: only Q4_K has repacked layouts; with AMX, Q8_0 has AMX tiles too; BF16 neither
    assert [p.name for p in ap.candidates(s, amx=False)] == ["q4_k_m/extra", "q4_k_m/plain", "q8_0/plain", "bf16/plain"]
    assert [p.name for p in ap.candidates(s, amx=True)] == ["q4_k_m/extra", "q4_k_m/plain", "q8_0/extra", "q8_0/plain",
                                                            "bf16/plain"]
    assert ap.extra_applies("bf16", False, arch="aarch64")
    assert [p.name for p in ap.candidates(s.with_(answer_format="q8_0"), amx=True)] == ["q8_0/extra", "q8_0/plain"]
    assert [p.name for p in ap.candidates(s.with_(llama_extra_buffers="off"))] == ["q4_k_m/plain", "q8_0/plain",
                                                                                   "bf16/plain"]
    assert [p.name for p in ap.candidates(s.with_(llama_extra_buffers="on", answer_format="bf16"))] == ["bf16/extra"]
    assert ap.AnswerPath.parse("q8_0/extra") == ap.AnswerPath("q8_0", True)
    # a converted format is tried only where llama.cpp has a fast kernel for it on the CPU (none on this Zen 3)
    zen3, xeon = {"avx2", "fma", "f16c"}, {"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_int8"}
    q8x, q8, bf = ap.AnswerPath("q8_0", True), ap.AnswerPath("q8_0", False), ap.AnswerPath("bf16", False)
    assert ap.not_worth(bf, zen3, False, "x86_64").startswith("not tried: the CPU has no AVX512_BF16")
    assert ap.not_worth(q8x, zen3, False, "x86_64") and ap.not_worth(q8, xeon, True, "x86_64")
    assert not ap.not_worth(bf, xeon, True, "x86_64") and not ap.not_worth(q8x, xeon, True, "x86_64")
    assert not ap.not_worth(bf, zen3, False, "aarch64") and not ap.not_worth(ap.AnswerPath("q4_k_m", True), zen3, False)
    with pytest.raises(ValueError):
        ap.candidates(s.with_(answer_path_formats="q4_k_m,f32"))


def test_the_build_stamp_says_when_to_rebuild(tmp_path, monkeypatch):
    from pipeline.backends import llama_build as lb

    native = "-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF"
    monkeypatch.setattr(lb, "stamp_file", lambda: tmp_path / "llama-cpp-build.txt")
    (tmp_path / "llama-cpp-build.txt").write_text(lb.wanted(native) + "\n")
    assert lb.check(native) == []  # built with these flags on this CPU: nothing rebuilt
    why = lb.check(native + " -DCMAKE_CXX_FLAGS=-fno-dse")
    assert len(why) == 1 and "the set-up now builds with" in why[0]  # the flags changed: rebuilt


def test_the_build_check_reads_this_build_and_the_cpu():
    """The set-up rebuilds llama.cpp only when its stamp or features say it was built otherwise: this machine's
    own build (native) passes; a build with a feature the CPU lacks, or a native one without one it has, does not."""
    from pipeline.backends.llama_build import check, feature_mismatch, wanted

    info = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | REPACK = 1 |"
    zen3 = {"avx", "avx2", "f16c", "fma", "bmi2"}
    assert feature_mismatch(info, zen3, native=True) == []
    assert feature_mismatch(info, zen3 | {"avx512f", "avx512_bf16"}, native=True) == [
        "built without AVX512, which this CPU has (GGML_NATIVE)",
        "built without AVX512_BF16, which this CPU has (GGML_NATIVE)"]
    assert feature_mismatch(info, zen3 | {"avx512f"}, native=False) == []
    assert feature_mismatch(info + " AVX512 = 1 |", zen3, native=False) == ["built with AVX512, which this CPU lacks"]
    native = "-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF"
    assert wanted(native, zen3) != wanted(native + " -DCMAKE_CXX_FLAGS=-fno-dse", zen3)
    assert wanted(native, zen3) != wanted(native, zen3 | {"avx512f"})  # another CPU
    from pipeline.backends.llama_build import stamp_file

    if not stamp_file().exists():  # this venv's build, made by the set-up on this CPU, is the one it would make
        assert check(native) == []
