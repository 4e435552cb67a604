"""GPU memory while a stage runs, read from ``nvidia-smi`` (all processes on each GPU count).

vLLM with tensor parallelism allocates in worker processes, so the numbers of
``torch.cuda`` in the calling process miss most of it; the device's used memory
(sampled twice a second) does not.
"""
from __future__ import annotations

import shutil
import subprocess
import threading

QUERY = ["nvidia-smi", "--query-gpu=index,name,memory.used,memory.total", "--format=csv,noheader,nounits"]


def parse_smi(text: str) -> list[dict]:
    """Rows of ``nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader,nounits``."""
    out = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            continue
        idx, name, used, total = parts
        out.append({"index": int(idx), "name": name, "used_mib": int(float(used)), "total_mib": int(float(total))})
    return out


def snapshot() -> list[dict] | None:
    """Each GPU's used and total memory now, or None without nvidia-smi / GPUs."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        r = subprocess.run(QUERY, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = parse_smi(r.stdout) if r.returncode == 0 else []
    return rows or None


class GpuMonitor:
    """``with GpuMonitor() as m: ...`` then ``m.report()``: baseline and peak used memory per GPU."""

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.base = snapshot()
        self.available = self.base is not None
        self.peak = {g["index"]: dict(g) for g in self.base or []}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        for g in snapshot() or []:
            p = self.peak.setdefault(g["index"], dict(g))
            p["used_mib"] = max(p["used_mib"], g["used_mib"])

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "GpuMonitor":
        if self.available:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread:
            self._stop.set()
            self._thread.join(timeout=5)
            self._sample()

    def report(self) -> dict:
        if not self.available:
            return {"available": False, "why": "no NVIDIA GPU visible (nvidia-smi missing or lists no device)"}
        base = {g["index"]: g["used_mib"] for g in self.base or []}
        return {"available": True, "gpus": [
            {"index": i, "name": p["name"], "total_mib": p["total_mib"], "before_mib": base.get(i, 0),
             "peak_mib": p["used_mib"], "stage_peak_mib": p["used_mib"] - base.get(i, 0)}
            for i, p in sorted(self.peak.items())]}
