"""pipeline/backends/ggml_cpu.py (issue 56): which CPU kernels llama.cpp runs, and a portable build's loading."""
from __future__ import annotations

import pytest

from pipeline.backends import ggml_cpu as G

MAPS = """7f00 r-xp 00000000 08:01 1 /venv/llama_cpp/lib/libggml-base.so.0.25.3
7f01 r-xp 00000000 08:01 2 /venv/llama_cpp/lib/libggml-cpu-haswell.so
7f02 r--p 00000000 08:01 2 /venv/llama_cpp/lib/libggml-cpu-haswell.so
"""


def test_the_variant_is_read_from_the_libraries_a_process_maps():
    assert G.variant_of(MAPS) == "haswell"
    assert G.variant_of("7f r-xp 0 0 1 /venv/llama_cpp/lib/libggml-cpu.so.0.25.3\n") == G.NATIVE
    assert G.variant_of("7f r-xp 0 0 1 /venv/llama_cpp/lib/libggml-base.so\n") == "none"
    assert G.label("haswell") == "haswell kernels (portable build)" and G.label(G.NATIVE) == "native build"


def test_a_portable_build_s_variants_are_listed_from_its_files(tmp_path):
    for n in ("libggml-cpu-haswell.so", "libggml-cpu-zen4.so", "libggml-cpu-x64.so", "libggml-base.so",
              "libggml.so"):
        (tmp_path / n).write_bytes(b"")
    assert G.variants(tmp_path) == ["haswell", "x64", "zen4"]


def test_the_set_up_s_native_build_runs_its_own_kernels_and_refuses_a_variant(monkeypatch):
    """The local build (GGML_NATIVE, its CPU backend linked in) has no variants: asking for one says so."""
    if G.variants():
        pytest.skip("this llama-cpp-python is a portable build (tests/test_portable_build.py covers it)")
    assert G.load() == G.NATIVE and G.loaded_variant() == G.NATIVE
    monkeypatch.setattr(G, "_loaded", None)
    with pytest.raises(G.VariantUnavailable, match="only a portable build"):
        G.load("haswell")
    assert G.load("auto") == G.NATIVE
