"""Fitting the weights the product ships (``pipeline/answering/weights.json``) — apart from the benchmarks.

The benchmarks that fit a model (``bench.flag``; before issue 46 also ``bench.answer_quality``) only measure: they
write what they fitted to a file under ``bench/results/fitted/`` (the models, and from what data, by which
command, when). ``python -m fit FILE...`` is the one command that writes the shipped weights: it puts each
file's models into ``weights.json`` and records, per model, where it came from (``provenance``)."""
from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = ROOT / "pipeline" / "answering" / "weights.json"
FITTED = ROOT / "bench" / "results" / "fitted"


def write_fitted(name: str, models: dict, data: str, command: str) -> Path:
    """A benchmark's fitted ``models`` (keys of weights.json) to ``bench/results/fitted/<name>.json``, with the data
    they were fitted on and the command that fitted them; nothing under ``pipeline/`` is touched."""
    FITTED.mkdir(parents=True, exist_ok=True)
    path = FITTED / f"{name}.json"
    path.write_text(json.dumps({"models": models, "data": data, "command": command,
                                "date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"},
                               indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def apply(files: list[Path], weights: Path = WEIGHTS) -> list[str]:
    """Put every file's models into ``weights`` (the rest of it kept); returns one line per model written."""
    w = json.loads(weights.read_text(encoding="utf-8"))
    prov = w.setdefault("provenance", {})
    said = []
    for f in files:
        fitted = json.loads(Path(f).read_text(encoding="utf-8"))
        for key, model in fitted["models"].items():
            w[key] = model
            prov[key] = {k: fitted[k] for k in ("data", "command", "date")}
            said.append(f"{key}: fitted on {fitted['data']} ({fitted['date']}; {fitted['command']})")
    weights.write_text(json.dumps(w, indent=1) + "\n", encoding="utf-8")
    return said


def main(argv: list[str] | None = None) -> int:
    files = [Path(x) for x in (sys.argv[1:] if argv is None else argv)]
    if not files or any(f.name in ("-h", "--help") for f in files):
        print(f"usage: python -m fit FILE...   (fitted-model files, e.g. {FITTED.relative_to(ROOT)}/flag.json)\n\n"
              f"{__doc__}")
        return 0 if files else 2
    for line in apply(files):
        print(line)
    print(f"wrote {WEIGHTS.relative_to(ROOT)}")
    return 0
