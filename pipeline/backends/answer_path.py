"""The answer path — the model's format × llama.cpp's extra weight buffers — chosen by measuring on the machine.

Which path reads prompts fastest depends on the CPU, the VM and the build, not on flags alone (BF16 is faster
than the shipped Q4_K_M on an AMD EPYC with AVX512_BF16 and slower on an Intel Xeon that has it too; llama.cpp's
AMX path dies with SIGILL on its first decode in a VM whose AMX works for other code). So, once per machine and
build (at set-up, else at the first start), each candidate path is tried in a child process
(``pipeline.backends.answer_probe``): it answers a fixed check, whose letters must be the reference path's, then
a fixed question for a few seconds. The fastest that passed is taken; within ``answer_path_tie`` of the fastest,
the lighter in memory. A child that crashes (a signal), fails or runs out of time is skipped with its reason; the
app's process never runs an untried path.

Candidates: each format of ``answer_path_formats`` (the shipped ``q4_k_m``; ``q8_0`` and ``bf16`` converted from
it once by llama.cpp's quantizer) × the extra buffers on (``extra``: llama.cpp's repacked weight layouts, and
where the build and the CPU have AMX, its AMX tiles: the AMX route) where they take any of the format's weights,
and off (``plain``). A converted format is tried only where llama.cpp has a fast kernel for it on the CPU (BF16:
AVX512_BF16; Q8_0: AMX tiles), the others are recorded as not tried, with why (``not_worth``): the set-up stays
short. ``answer_format`` and ``llama_extra_buffers`` force a format or the buffers (the rest is still chosen among
what was measured); both forced, nothing is measured.

The record (``answer-paths.json`` beside the model, in ``shipped.cache_dir()``) is keyed by the CPU (model,
flags), llama.cpp's version and system info, and the model: another CPU or another build is measured anew. Each
candidate keeps its prompt tokens per second, seconds per answer, peak memory, check letters and status.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..settings import Settings
from .shipped import FORMATS, QWEN_1_5B, cache_dir, cpu_flags, format_file, format_ready

log = logging.getLogger(__name__)

REFERENCE = "q4_k_m/plain"  # the shipped weights on llama.cpp's plainest kernels: the check's reference letters
CHECK_GOLD = "EC"  # the fixed check's known answers (answer_probe.CHECK), used where the reference did not run
RECORD_VERSION = 2  # 2: the two-fact check, timed in turns


@dataclass(frozen=True)
class AnswerPath:
    fmt: str
    extra: bool

    @property
    def name(self) -> str:
        return f"{self.fmt}/{'extra' if self.extra else 'plain'}"

    @classmethod
    def parse(cls, name: str) -> "AnswerPath":
        fmt, _, buf = name.partition("/")
        if fmt not in FORMATS or buf not in ("extra", "plain"):
            raise ValueError(f"answer path {name!r}: expected FORMAT/extra or FORMAT/plain, FORMAT one of {FORMATS}")
        return cls(fmt, buf == "extra")


# ---- the machine: CPU, AMX, build ------------------------------------------------------------------------------
def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's name with its family and model numbers (``AMD EPYC (family 25 model 1)``)."""
    if not cpuinfo.exists():
        return "unknown CPU"
    fields: dict[str, str] = {}
    for line in cpuinfo.read_text(errors="replace").splitlines():
        if not line.strip():
            break  # the first processor is enough
        k, _, v = line.partition(":")
        fields.setdefault(k.strip(), v.strip())
    name = fields.get("model name", "unknown CPU")
    return f"{name} (family {fields.get('cpu family', '?')} model {fields.get('model', '?')})"


SIMD = re.compile(r"^(avx|amx|f16c|fma|sse4|vnni)")


def simd_flags(flags: set[str]) -> list[str]:
    """The flags that decide llama.cpp's kernels (AVX*, AMX*, F16C, FMA, SSE4), sorted."""
    return sorted(f for f in flags if SIMD.match(f))


def amx_cpu(flags: set[str] | None = None) -> bool:
    """Whether the CPU says it has AMX tiles with int8 products (``amx_tile``, ``amx_int8`` in /proc/cpuinfo)."""
    return {"amx_tile", "amx_int8"} <= (cpu_flags() if flags is None else flags)


def system_info() -> str:
    """llama.cpp's features as built and loaded (in a portable build, those of the CPU variant that runs)."""
    import llama_cpp

    from .ggml_cpu import load

    load()

    return llama_cpp.llama_print_system_info().decode(errors="replace").strip()


def amx_build(info: str | None = None) -> bool:
    """Whether this llama.cpp build has its AMX code (``GGML_NATIVE`` on a CPU with AMX: ``AMX_INT8 = 1``)."""
    return "AMX_INT8 = 1" in (system_info() if info is None else info)


def machine() -> dict:
    """What a measurement holds for: the CPU (its name and every flag), llama.cpp's version and build, the model."""
    import llama_cpp

    flags = cpu_flags()
    info = system_info()
    return {"cpu": cpu_model(), "simd": simd_flags(flags),
            "flags_sha": hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:16],
            "llama_cpp": getattr(llama_cpp, "__version__", "?"), "system_info": info,
            "amx": {"cpu": amx_cpu(flags), "build": amx_build(info)}, "model": QWEN_1_5B["sha256"][:16],
            "version": RECORD_VERSION}


def machine_key(m: dict) -> str:
    return hashlib.sha256(json.dumps(m, sort_keys=True).encode()).hexdigest()[:16]


def buffers_label(extra: bool, m: dict) -> str:
    """What the extra buffers are on this machine, for people."""
    if not extra:
        return "extra buffers off"
    return "AMX tiles + repacked layouts" if m["amx"]["cpu"] and m["amx"]["build"] else "repacked layouts"


# ---- the candidates, measured in child processes ---------------------------------------------------------------
def extra_applies(fmt: str, amx: bool, arch: str | None = None) -> bool:
    """Whether llama.cpp puts any of ``fmt``'s weights in an extra buffer here (else the extra buffers on are the
    plain path again, not worth measuring). On x86, as the vendored llama.cpp has it (ggml-cpu ``repack.cpp``,
    ``amx/common.h``): the repacked layouts take Q4_K, Q4_0 and IQ4_NL (AVX2), AMX tiles take Q4_K, Q6_K and Q8_0; BF16 neither.
    Elsewhere (ARM's repacked Q8_0 and more) both are measured."""
    import platform

    if (arch or platform.machine()).lower() not in ("x86_64", "amd64"):
        return True
    return fmt in ("q4_k_m", "q4_0", "iq4_nl") or (fmt == "q8_0" and amx)


def not_worth(path: AnswerPath, flags: set[str], amx: bool, arch: str | None = None) -> str:
    """Why a candidate is not tried here ('' where it is): on x86, a converted format where llama.cpp has no fast
    kernel for it on this CPU (measured on an AMD EPYC Zen 3, AVX2, loaded: BF16 read prompts at 0.25–0.5× the
    Q4_K_M's speed with 3.4× its memory, Q8_0 at 0.5–0.6× with 1.5×); a format named by ``answer_format`` is tried."""
    import platform

    if (arch or platform.machine()).lower() not in ("x86_64", "amd64"):
        return ""
    if path.fmt == "bf16" and "avx512_bf16" not in flags:
        return "not tried: the CPU has no AVX512_BF16 (llama.cpp converts BF16 in software: slower than Q4_K_M)"
    if path.fmt == "q8_0" and not (amx and path.extra):
        return "not tried: Q8_0 is fast only on AMX tiles (AMX CPU and build), slower than Q4_K_M without"
    if path.fmt in ("q4_0", "iq4_nl") and not path.extra:
        return f"not tried: {path.fmt.upper()} is fast only in llama.cpp's repacked layout (extra buffers on)"
    return ""


def candidates(settings: Settings, amx: bool | None = None) -> list[AnswerPath]:
    """The paths to choose among: the formats tried (``answer_format``, else ``answer_path_formats``) × the
    buffers (``llama_extra_buffers``, else on where they take any of the format's weights, and off)."""
    a = settings.answer
    fmts = [a.answer_format] if a.answer_format != "auto" else [f.strip() for f in a.answer_path_formats.split(",")
                                                               if f.strip()]
    for f in fmts:
        if f not in FORMATS:
            raise ValueError(f"answer_path_formats: {f!r}; known: {', '.join(FORMATS)}")
    if a.llama_extra_buffers != "auto":
        return [AnswerPath(f, a.llama_extra_buffers == "on") for f in fmts]
    amx = (amx_cpu() and amx_build()) if amx is None else amx
    return [AnswerPath(f, b) for f in fmts for b in (True, False) if not b or extra_applies(f, amx)]


def _child(args: list[str], timeout: float) -> tuple[int | None, str, str]:
    """Runs ``python -m pipeline.backends.answer_probe ARGS``: (return code or None on time-out, stdout, stderr)."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    try:
        r = subprocess.run([sys.executable, "-m", "pipeline.backends.answer_probe", *args], cwd=root, env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out, ""
    return r.returncode, r.stdout, r.stderr


def _failure(rc: int | None, err: str, timeout: float) -> str:
    if rc is None:
        return f"timed out after {timeout:.0f} s"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"crashed: killed by {name}"
    tail = [x for x in err.strip().splitlines() if x.strip()][-1:] or ["no message"]
    return f"failed (exit {rc}): {tail[0][:300]}"


def probe_path(path: AnswerPath, seconds: float, timeout: float = 0) -> dict:
    """One candidate tried in a child: its file converted (once) in one child, then measured in another."""
    out: dict = {"path": path.name, "format": path.fmt, "extra": path.extra}
    t0 = time.perf_counter()
    if not format_ready(path.fmt):
        rc, so, se = _child(["convert", path.fmt], 1800)
        if rc != 0:
            return {**out, "status": "not converted: " + _failure(rc, se, 1800)}
        out["converted_s"] = round(time.perf_counter() - t0, 1)
    file = str(format_file(path.fmt))  # there now: only looked up
    timeout = timeout or 600 + 4 * seconds  # a loaded machine reads slowly; a hang is what this catches
    rc, so, se = _child(["probe", json.dumps({"file": file, "extra": path.extra, "seconds": seconds,
                                              "name": path.name})], timeout)
    line = next((x for x in so.splitlines() if x.startswith("PROBE ")), None)
    if rc != 0 or line is None:
        return {**out, "status": _failure(rc, se, timeout)}
    got = json.loads(line[len("PROBE "):])
    got.pop("system_info", None)  # the machine's, recorded once
    return {**out, **got, "status": "ran", "load_avg": round(os.getloadavg()[0], 2)}  # others' work, if any


def choose(results: list[dict], tie: float = 0.05) -> tuple[dict | None, str]:
    """The chosen candidate and why: of those that ran and whose check letters are the reference's (the
    reference path's letters where it ran, else the check's known answers), the fastest in prompt tokens per
    second; within ``tie`` of it, the lightest in peak memory. Each candidate left out gets its reason."""
    ref = next((r for r in results if r["path"] == REFERENCE and r.get("status") == "ran"), None)
    want = ref["letters"] if ref else CHECK_GOLD
    for r in results:
        r.pop("passed", None)
        if r.get("status") == "ran":
            r["passed"] = r["letters"] == want
            if not r["passed"]:
                r["reason"] = f"check letters {r['letters']} differ from the reference's {want}"
    ok = [r for r in results if r.get("passed")]
    if not ok:
        return None, "no path passed: " + "; ".join(f"{r['path']} {r.get('reason') or r['status']}" for r in results)
    best = max(r["tokens_per_s"] for r in ok)
    near = [r for r in ok if r["tokens_per_s"] >= (1 - tie) * best]
    pick = min(near, key=lambda r: (r["peak_rss_mb"], -r["tokens_per_s"]))
    how = "the fastest" if pick["tokens_per_s"] == best else f"within {tie:.0%} of the fastest and the lightest"
    tried = [r for r in results if not r.get("status", "").startswith("not tried")]
    return pick, (f"measured: {pick['tokens_per_s']:.0f} prompt tokens/s, {pick['peak_rss_mb'] / 1024:.1f} GB, "
                  f"{how} of {len(ok)} that passed the check ({len(tried)} tried)")


def summary(results: list[dict]) -> list[str]:
    """Each candidate in a few words: its speed, or why it was left out."""
    return [f"{r['path']}: {r['tokens_per_s']:.0f} prompt tokens/s, {r['peak_rss_mb']} MB" if r.get("passed") else
            f"{r['path']}: {r.get('reason') or r['status']}" for r in results]


def mem_available_mb(meminfo: Path = Path("/proc/meminfo")) -> float:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def race_paths(results: list[dict], seconds: float) -> list[str]:
    """Times the candidates that ran alone and passed the check again, together in one child and in turns
    (``answer_probe.race``), as many of the fastest as fit in half the memory available; their ``tokens_per_s``
    becomes the race's (the first timing is kept as ``alone_tokens_per_s``). Returns the paths raced."""
    choose(results)  # marks each ``passed``
    ok = sorted((r for r in results if r.get("passed")), key=lambda r: -r["tokens_per_s"])
    budget, pick = mem_available_mb() / 2, []
    for r in ok:
        if sum(x["peak_rss_mb"] for x in pick) + r["peak_rss_mb"] <= budget or not pick:
            pick.append(r)
    if len(pick) < 2:
        return []
    files = {r["path"]: str(format_file(r["format"])) for r in pick}
    spec = {"paths": [{"name": r["path"], "file": files[r["path"]], "extra": r["extra"]} for r in pick],
            "seconds": seconds}
    timeout = 600 + 8 * seconds * len(pick)
    rc, so, se = _child(["race", json.dumps(spec)], timeout)
    line = next((x for x in so.splitlines() if x.startswith("RACE ")), None)
    if rc != 0 or line is None:
        for r in pick:
            r["race"] = "failed: " + _failure(rc, se, timeout)
        return []
    got = json.loads(line[len("RACE "):])
    for r in pick:
        r["alone_tokens_per_s"] = r["tokens_per_s"]
        r["tokens_per_s"], r["race_runs"] = got[r["path"]]["tokens_per_s"], got[r["path"]]["runs"]
        r["race"] = f"timed in turns with {', '.join(x['path'] for x in pick if x is not r)}"
    log.info("in turns: %s", ", ".join(f"{r['path']} {r['tokens_per_s']:.0f}" for r in pick))
    return [r["path"] for r in pick]


# ---- the record beside the model ------------------------------------------------------------------------------
def record_file() -> Path:
    return cache_dir() / "answer-paths.json"


def _read_all() -> dict:
    f = record_file()
    try:
        data = json.loads(f.read_text())
        return data if isinstance(data, dict) and isinstance(data.get("records"), dict) else {"records": {}}
    except (OSError, ValueError):
        return {"records": {}}


def read_record(key: str) -> dict | None:
    return _read_all()["records"].get(key)


def _write_record(key: str, rec: dict) -> None:
    data = _read_all()
    data["records"][key] = rec
    f = record_file()
    tmp = f.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, f)


def measure(settings: Settings, paths: list[AnswerPath] | None = None) -> dict:
    """Measures the candidate paths this machine's record lacks (all of ``candidates(settings)`` by default) and
    returns the record, written beside the model; one process at a time measures (a lock file)."""
    m = machine()
    key = machine_key(m)
    paths = candidates(settings) if paths is None else paths
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / "answer-paths.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rec = read_record(key) or {"machine": m, "candidates": []}
        have = {r["path"] for r in rec["candidates"]}
        todo = [p for p in paths if p.name not in have]
        if todo:
            seconds = settings.answer.answer_path_seconds
            log.info("measuring %d answer paths on %s (%.0f s each)", len(todo), m["cpu"], seconds)
            flags, amx = cpu_flags(), m["amx"]["cpu"] and m["amx"]["build"]
            named = settings.answer.answer_format != "auto"
            new = []
            for p in todo:  # alone, each in its own child: its check, and a first timing
                skip = "" if named else not_worth(p, flags, amx)
                r = {"path": p.name, "format": p.fmt, "extra": p.extra, "status": skip} if skip else probe_path(p, 0)
                r["buffers"] = buffers_label(p.extra, m)
                log.info("answer path %s: %s", p.name, f"{r['tokens_per_s']:.0f} prompt tokens/s alone, letters "
                         f"{r['letters']}" if r["status"] == "ran" else r["status"])
                rec["candidates"].append(r)
                new.append(r)
                rec.update(measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), seconds_each=seconds)
                _write_record(key, rec)  # each as it ends: a measuring cut short keeps what it did
            raced = race_paths(new, seconds)
            if raced:
                _write_record(key, rec)
    return rec


def answer_path(settings: Settings, measure_missing: bool = True) -> dict:
    """The answer path for ``settings``: ``{"path", "format", "extra", "buffers", "why"}`` and, where measured,
    ``tokens_per_s`` and ``peak_rss_mb`` (the record's). Measures what this machine's record lacks (once)."""
    a = settings.answer
    if a.answer_format != "auto" and a.llama_extra_buffers != "auto":
        p = AnswerPath(a.answer_format, a.llama_extra_buffers == "on")
        return {"path": p.name, "format": p.fmt, "extra": p.extra, "why": "set by answer_format and llama_extra_buffers"}
    names = {p.name for p in candidates(settings)}
    key = machine_key(machine())
    rec = read_record(key)
    if (rec is None or not names <= {r["path"] for r in rec["candidates"]}) and measure_missing:
        rec = measure(settings)
    results = [r for r in (rec or {}).get("candidates", []) if r["path"] in names]
    pick, why = choose(results, a.answer_path_tie) if results else (None, "not measured on this machine yet")
    forced = [f"{k}={v}" for k, v in (("answer_format", a.answer_format), ("llama_extra_buffers", a.llama_extra_buffers))
              if v != "auto"]
    if pick is None:  # nothing ran: the shipped file with its buffers as the setting (or llama.cpp's default) say
        extra = {"on": True, "off": False}.get(a.llama_extra_buffers, not (amx_cpu() and amx_build()))
        fmt = a.answer_format if a.answer_format != "auto" else "q4_k_m"
        return {"path": AnswerPath(fmt, extra).name, "format": fmt, "extra": extra, "why": why}
    return {"path": pick["path"], "format": pick["format"], "extra": pick["extra"],
            "why": f"{why}; {pick.get('buffers', '')}" + (f"; {', '.join(forced)}" if forced else ""),
            "tokens_per_s": round(pick["tokens_per_s"], 1), "peak_rss_mb": pick["peak_rss_mb"],
            "measured_at": rec.get("measured_at", ""), "cpu": rec["machine"]["cpu"], "candidates": summary(results)}


def chosen_extra(settings: Settings) -> bool:
    """The extra buffers of the path chosen for ``settings`` (read from the record, never measured here; without a
    record, as ``llama_extra_buffers`` says, off for llama.cpp's AMX code on an AMX CPU)."""
    return answer_path(settings, measure_missing=False)["extra"]


def answer_gguf(setting: str = "auto", settings: Settings | None = None) -> tuple[Path, str, str]:
    """The answer model file for ``answer_format`` ``setting`` (with the other settings of ``settings``, else
    the environment's): (path, format, why)."""
    from ..settings import load_settings

    s = (settings or load_settings()).with_(answer_format=setting)
    c = answer_path(s)
    return format_file(c["format"]), c["format"], c["why"]


def answer_model_note(settings) -> dict:
    """What answers, for people and records (the app's about line, metrics.json): the llama.cpp model's file,
    format, buffers and why (measured tokens/s), or the configured model."""
    if settings.answer.answerer != "llama-cpp":
        return {"backend": settings.answer.answerer, "model": settings.roles.answer_model}
    from .ggml_cpu import label, load

    c = answer_path(settings)
    name = QWEN_1_5B["name"].replace("q4_k_m", c["format"])
    return {"backend": "llama-cpp", "model": name, **c, "cpu_kernels": label(load())}


def main(argv: list[str]) -> int:
    """``python -m pipeline.backends.answer_path [--again]``: the choice for the environment's settings (measured
    where this machine's record lacks it; ``--again`` measures anew), printed with every candidate."""
    from ..settings import load_settings

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    s = load_settings()
    if "--again" in argv:
        key = machine_key(machine())
        data = _read_all()
        if data["records"].pop(key, None) is not None:
            f = record_file()
            f.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    c = answer_path(s)
    rec = read_record(machine_key(machine())) or {}
    for r in rec.get("candidates", []):
        print(f"  {r['path']:14} {r['status'] if r['status'] != 'ran' else ''}"
              + (f"{r['tokens_per_s']:6.1f} prompt tokens/s, {r['seconds_per_answer']:.2f} s/answer, "
                 f"{r['peak_rss_mb']} MB, letters {r['letters']}" if r["status"] == "ran" else ""))
    print(f"answer path: {c['path']} ({c['why']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
