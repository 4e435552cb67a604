"""llama.cpp's CPU kernels: which variant runs, and loading it in a portable build.

* The local set-up's build (``scripts/setup.sh``, ``GGML_NATIVE=ON``) links one CPU backend compiled for this
  machine's CPU: the variant is ``native``.
* The build a Hugging Face Space compiles from ``requirements.txt`` (``GGML_BACKEND_DL`` with
  ``GGML_CPU_ALL_VARIANTS``) ships one CPU backend per x86-64 level (``libggml-cpu-haswell.so`` for AVX2,
  ``-skylakex``/``-icelake``/``-zen4`` for AVX-512, ``-sapphirerapids`` for AMX, …) and registers none by itself:
  :func:`load` asks llama.cpp to load the best one the running CPU supports (``ggml_backend_load_all_from_path``,
  each variant scoring itself against the CPU). A Space on an AVX-512 or AMX host gets those kernels, not AVX2's.

``PDFQA_LLAMA_CPU_VARIANT=<name>`` loads that variant instead (``haswell``: what an AVX2-only host runs), for
measuring; one the CPU cannot run is refused with a clear message. Every use of llama-cpp-python goes through
:func:`load` first (the answerer, the path measurement and its child processes, the model conversion, the
OpenAI-compatible server); the variant is logged when the answer model loads and shown beside the answer path.
"""
from __future__ import annotations

import ctypes
import logging
import os
import re
import threading
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "PDFQA_LLAMA_CPU_VARIANT"
NATIVE = "native"
_lock = threading.Lock()
_loaded: str | None = None


class VariantUnavailable(RuntimeError):
    """The CPU variant asked for is not in this build, or this CPU cannot run it."""


def lib_dir() -> Path:
    """Where llama-cpp-python keeps libllama and libggml (``llama_cpp/lib``)."""
    import llama_cpp

    return Path(llama_cpp.__file__).parent / "lib"


def variants_dir() -> Path:
    """Where a portable build's CPU variants are: llama-cpp-python's wheel installs these loadable modules as
    CMake's runtime files, in ``bin/`` beside the ``llama_cpp`` package (site-packages/bin), not in
    ``llama_cpp/lib``; llama.cpp itself looks only beside the program (python) and in the working directory, so
    without :func:`load` a portable build finds no CPU backend at all."""
    for d in _backend_dirs():
        if variants(d):
            return d
    return lib_dir()


def _backend_dirs() -> tuple[Path, Path]:
    """Where a loadable CPU backend may be: ``llama_cpp/lib``, and ``bin/`` beside the package (the wheel's)."""
    lib = lib_dir()
    return lib, lib.parent.parent / "bin"


def variants(folder: Path | None = None) -> list[str]:
    """The CPU variants a portable build ships (``[]`` for a build with its CPU backend linked in)."""
    folder = variants_dir() if folder is None else folder
    return sorted(m.group(1) for f in folder.glob("libggml-cpu-*.so")
                  if (m := re.fullmatch(r"libggml-cpu-([\w.]+)\.so", f.name)))


def variant_of(maps: str) -> str:
    """The CPU variant a process has loaded, from its ``/proc/<pid>/maps`` text (``native``: linked in;
    ``none``: no CPU backend loaded)."""
    names = {Path(line.split()[-1]).name for line in maps.splitlines() if "libggml-cpu" in line}
    picked = sorted(m.group(1) for n in names if (m := re.fullmatch(r"libggml-cpu-([\w.]+)\.so(?:\.\d+)*", n)))
    if picked:
        return ",".join(picked)
    return NATIVE if names else "none"


def loaded_variant() -> str:
    """The variant this process runs (read from the libraries it has mapped)."""
    try:
        return variant_of(Path("/proc/self/maps").read_text())
    except OSError:  # not Linux: a native build is all the set-up makes there
        return NATIVE


def _ggml_in_use() -> Path:
    """The libggml file this process has mapped (through libllama's SONAME, ``libggml.so.0``). The wheel ships
    ``libggml.so``, ``.so.0`` and ``.so.0.x`` as copies, not links: opening another of them loads a second libggml
    with a registry of its own, where a loaded backend is not seen by libllama (its "no backends are loaded")."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            f = Path(line.split()[-1])
            if re.fullmatch(r"libggml\.so(?:\.\d+)*", f.name):
                return f
    except OSError:
        pass
    lib = lib_dir()
    return lib / "libggml.so.0" if (lib / "libggml.so.0").exists() else lib / "libggml.so"


def _libggml() -> ctypes.CDLL:
    """The libggml libllama uses (its backends' registry), with the loading calls' types set."""
    ggml = ctypes.CDLL(str(_ggml_in_use()))
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    ggml.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
    ggml.ggml_backend_load.argtypes, ggml.ggml_backend_load.restype = [ctypes.c_char_p], ctypes.c_void_p
    return ggml


def load(want: str | None = None) -> str:
    """Import llama-cpp-python with a CPU backend registered; returns the variant that runs. Idempotent."""
    global _loaded
    with _lock:
        if _loaded is not None:
            if want not in (None, "", "auto", _loaded):
                raise VariantUnavailable(f"llama.cpp runs the {_loaded} kernels already in this process: set {ENV} "
                                         "before it starts")
            return _loaded
        import llama_cpp  # noqa: F401 - loads libllama and libggml

        folder = variants_dir()
        have = variants(folder)
        want = (os.environ.get(ENV, "auto") if want is None else want).strip() or "auto"
        if have:
            ggml = _libggml()
            if want == "auto":
                ggml.ggml_backend_load_all_from_path(str(folder).encode())
            else:
                if want not in have:
                    raise VariantUnavailable(f"{ENV}={want}: this llama.cpp build has the CPU variants "
                                             f"{', '.join(have)}")
                if not ggml.ggml_backend_load(str(folder / f"libggml-cpu-{want}.so").encode()):
                    raise VariantUnavailable(f"{ENV}={want}: this CPU cannot run the {want} kernels")
            if not ggml.ggml_backend_reg_count():
                raise VariantUnavailable(f"no CPU variant of this llama.cpp build runs on this CPU ({', '.join(have)})")
        elif want not in ("auto", NATIVE):
            raise VariantUnavailable(f"{ENV}={want}: this llama.cpp build has its CPU backend built in (native); "
                                     "only a portable build (GGML_BACKEND_DL) has variants to choose from")
        else:  # a loadable backend without variants (GGML_BACKEND_DL alone): registered like the variants' best
            ggml = _libggml()
            if not ggml.ggml_backend_reg_count():
                for d in _backend_dirs():
                    ggml.ggml_backend_load_all_from_path(str(d).encode())
        _loaded = loaded_variant()
        log.info("llama.cpp CPU kernels: %s%s", label(_loaded),
                 f"; this build's variants: {', '.join(have)}" if have else "")
        return _loaded


def label(variant: str) -> str:
    """The variant for people: ``native build`` or ``haswell kernels (portable build)``."""
    return "native build" if variant == NATIVE else f"{variant} kernels (portable build)"
