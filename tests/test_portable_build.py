"""Issue 56: the portable llama.cpp build a Hugging Face Space compiles from requirements.txt (every x86-64 CPU
variant as a loadable backend) loads the best variant this CPU runs, says which, and answers; a variant forced
by PDFQA_LLAMA_CPU_VARIANT (haswell: what an AVX2-only host runs) answers the same. The build is
``.llama-portable/`` (scripts/setup-portable.sh, run by ``setup.sh --dev``), put first on the child's path; the
app's own venv keeps its native build."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.backends.answer_path import CHECK_GOLD
from pipeline.backends.ggml_cpu import ENV, variants
from pipeline.backends.shipped import cpu_flags, format_file

ROOT = Path(__file__).resolve().parent.parent
PORTABLE = ROOT / ".llama-portable"
AVX2_AND_BELOW = {"x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell"}
# the child configures logging as the app does, then probes the answer path (answer_probe: the fixed check)
PROBE = ("import logging, sys; logging.basicConfig(level=logging.INFO, format='%(name)s: %(message)s'); "
         "from pipeline.backends.answer_probe import main; sys.exit(main(sys.argv[1:]))")


@pytest.fixture(scope="module")
def portable():
    lib = PORTABLE / "bin"  # where the wheel puts the variants (ggml_cpu.variants_dir)
    if not (lib.is_dir() and variants(lib)):
        why = "no portable llama.cpp build in .llama-portable (bash scripts/setup-portable.sh)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(why)
        pytest.skip(why)
    return variants(lib)


def probe(variant: str | None = None) -> tuple[dict, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PORTABLE), str(ROOT)])}
    env.pop(ENV, None)
    if variant:
        env[ENV] = variant
    arg = json.dumps({"file": str(format_file("q4_k_m")), "extra": False, "seconds": 1})
    out = subprocess.run([sys.executable, "-c", PROBE, "probe", arg], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("PROBE "))
    return json.loads(line[len("PROBE "):]), out.stderr


def test_the_portable_build_loads_the_best_variant_for_this_cpu_says_so_and_answers(portable):
    assert {"x64", "haswell", "skylakex", "icelake"} <= set(portable)  # every level, AVX2's to AVX-512's
    got, log = probe()
    assert got["letters"] == CHECK_GOLD  # the fixed check's known answers
    variant = got["cpu_variant"]
    assert variant in portable and f"llama.cpp CPU kernels: {variant} kernels (portable build)" in log
    flags = cpu_flags()
    if "avx512f" in flags:  # a Space on an AVX-512 (or AMX) host gets those kernels, not AVX2's
        assert variant not in AVX2_AND_BELOW, variant
    if {"amx_tile", "amx_int8"} <= flags and "sapphirerapids" in portable:
        assert variant == "sapphirerapids"
    assert "AVX2 = 1" in got["system_info"]


def test_a_forced_variant_runs_its_kernels_and_answers_the_same(portable):
    got, log = probe("haswell")
    assert got["cpu_variant"] == "haswell" and "haswell kernels (portable build)" in log
    assert got["letters"] == CHECK_GOLD and "AVX512 = 1" not in got["system_info"]
    # one this build lacks is refused with the variants it has
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PORTABLE), str(ROOT)]), ENV: "pentium"}
    out = subprocess.run([sys.executable, "-c", "from pipeline.backends.ggml_cpu import load; load()"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "has the CPU variants" in out.stderr and "haswell" in out.stderr
