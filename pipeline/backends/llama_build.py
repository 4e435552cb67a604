"""Whether the installed llama-cpp-python was built for this CPU with the set-up's flags (``scripts/setup.sh``).

pip neither rebuilds an installed llama-cpp-python when ``CMAKE_ARGS`` change, nor keys its wheel cache by them
(the key is the sdist's URL, hash and the interpreter): a fresh venv can get back a build made earlier with other
flags, or on another CPU. So the set-up writes a stamp of what it built with (the flags, the package's version,
the CPU) beside the venv, and asks this module after installing:

* ``python -m pipeline.backends.llama_build check [--fresh]`` — exit 0 when the stamp is this build's, or, without a stamp,
  when the build's features (``llama_print_system_info``) are the CPU's (a native build); exit 3 with the reasons
  otherwise (the set-up then rebuilds, bypassing the wheel cache). A build that crashes on import exits non-zero too.
  Without a stamp, an AMX build from an earlier set-up is rebuilt once (whether it has ``-fno-dse`` cannot be
  seen); one pip installed in this run (``--fresh``) is taken as built with this run's flags.
* ``python -m pipeline.backends.llama_build stamp`` — writes the stamp.
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from .shipped import cpu_flags

# /proc/cpuinfo flag → the name llama.cpp's system info gives it (listed there only when built in)
FEATURES = {"avx": "AVX", "avx2": "AVX2", "f16c": "F16C", "fma": "FMA", "bmi2": "BMI2", "avx_vnni": "AVX_VNNI",
            "avx512f": "AVX512", "avx512vbmi": "AVX512_VBMI", "avx512_vnni": "AVX512_VNNI",
            "avx512_bf16": "AVX512_BF16", "amx_int8": "AMX_INT8"}


def stamp_file() -> Path:
    return Path(sys.prefix) / "llama-cpp-build.txt"


def wanted(cmake_args: str | None = None, flags: set[str] | None = None) -> str:
    """What the set-up builds with: the flags, the package's version and the CPU (its every flag)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("llama_cpp_python")
    except PackageNotFoundError:
        v = "none"
    flags = cpu_flags() if flags is None else flags
    cpu = hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:16]
    args = os.environ.get("CMAKE_ARGS", "") if cmake_args is None else cmake_args
    return f"llama-cpp-python {v} | CMAKE_ARGS {' '.join(args.split())} | cpu {cpu}"


def feature_mismatch(info: str, flags: set[str], native: bool) -> list[str]:
    """Where the build's features are not the CPU's: one it has and the CPU lacks (it would crash), and, for a
    native build, one the CPU has that it lacks (built elsewhere or with other flags)."""
    out = []
    for flag, name in FEATURES.items():
        built = f"{name} = 1" in info
        if built and flag not in flags:
            out.append(f"built with {name}, which this CPU lacks")
        elif native and flag in flags and not built:
            out.append(f"built without {name}, which this CPU has (GGML_NATIVE)")
    return out


def check(cmake_args: str | None = None, fresh: bool = False) -> list[str]:
    """Why the installed build must be rebuilt ([] where it is the one the set-up would build). ``fresh``: pip
    installed it in this set-up run (built now, or from its cache: only its features can tell)."""
    args = os.environ.get("CMAKE_ARGS", "") if cmake_args is None else cmake_args
    f = stamp_file()
    if f.exists():
        have = f.read_text().strip()
        want = wanted(args)
        return [] if have == want else [f"built with «{have}», the set-up now builds with «{want}»"]
    import llama_cpp

    from .ggml_cpu import load

    load()
    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    why = feature_mismatch(info, cpu_flags(), native="GGML_NATIVE=ON" in args)
    if "-fno-dse" in args and "AMX_INT8 = 1" in info and not fresh:  # an AMX build from before its fix
        why.append("an AMX build without a stamp: whether it was built with -fno-dse (its tile configuration) "
                   "cannot be told")
    return why


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"] and set(argv[1:]) <= {"--fresh"}:
        why = check(fresh="--fresh" in argv)
        for w in why:
            print(f"llama.cpp's build: {w}", file=sys.stderr)
        return 3 if why else 0
    if argv == ["stamp"]:
        stamp_file().write_text(wanted() + "\n")
        return 0
    print("usage: python -m pipeline.backends.llama_build check [--fresh] | stamp", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
