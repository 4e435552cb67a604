"""Load on loopback: concurrent visitors (``gradio_client``) against one app, in waves.

    python -m bench.load --clients 16 --waves 3 --seconds 120 [--baseline-env MALLOC_ARENA_MAX=16]

Starts ``python app.py`` on a free loopback port with a fresh data directory
(or uses ``--url``). Each wave, ``--clients`` visitors run at once, each in its
own session: open the app, upload their own generated one-page PDF (a fact
only they have), ask about it, keep asking until the wave's ``--seconds`` are
up, then list their library again and leave. Every reply is checked for
isolation: a visitor's library, answer and candidates name only their own
document. Prints (and writes ``bench/load.md``) requests served, errors,
p50/p95 latency per request kind, the app's peak memory and its memory after
each wave (visitors come and go: it must not keep growing).
"""
from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import harness
from testkit import pdfgen  # the test helpers' PDF generator (PyMuPDF only)

WORDS = ["бурштин", "гранат", "сапфір", "смарагд", "топаз", "аметист", "опал", "рубін", "нефрит", "перламутр",
         "малахіт", "яшма", "агат", "берил", "коралл", "турмалін"]


@dataclass
class Visitor:
    """One visitor's own document and question; the answer is only in their PDF."""

    n: int
    wave: int
    word: str
    options: list[str]
    letter: str

    @property
    def file_name(self) -> str:
        return f"sklad-{self.wave}-{self.n}.pdf"

    @property
    def question(self) -> str:
        return f"Яке кодове слово відкриває склад номер {self.wave}{self.n:02d}?"

    def pdf(self) -> bytes:
        body = (f"Склад номер {self.wave}{self.n:02d} відкривається кодовим словом «{self.word}». "
                f"Кодове слово змінюють щомісяця, а попереднє слово більше не діє.\n"
                f"Ключі від складу {self.wave}{self.n:02d} зберігає черговий охоронець.")
        return pdfgen.ukrainian_pdf(f"Правила доступу до складу {self.wave}{self.n:02d}", [("Доступ", body)],
                                    footer=None)


def make_visitor(wave: int, n: int, rng: random.Random) -> Visitor:
    opts = rng.sample(WORDS, 6)
    return Visitor(n, wave, opts[0], (shuffled := rng.sample(opts, 6)), "ABCDEF"[shuffled.index(opts[0])])


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    isolation_breaches: list[str] = field(default_factory=list)
    right: int = 0
    asked: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def timed(self, kind: str, fn, *args):
        t0 = time.perf_counter()
        try:
            out = fn(*args)
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            with self.lock:
                self.errors.append(f"{kind}: {type(e).__name__}: {e}")
            raise
        with self.lock:
            self.latencies.setdefault(kind, []).append(time.perf_counter() - t0)
        return out


def _rows(df: dict) -> list[list]:
    return (df or {}).get("data") or []


def visit(url: str, v: Visitor, pdf_dir: Path, stats: Stats, deadline: float) -> None:
    from gradio_client import Client, handle_file

    path = pdf_dir / v.file_name
    path.write_bytes(v.pdf())
    # outputs only (no file downloads): a page image is served only to the browser holding its library's reader
    # cookie (docs/privacy.md), and the load test reads the answer's text
    c = Client(url, verbose=False, download_files=False)

    def call(kind: str, *args, api: str):
        return stats.timed(kind, lambda: c.submit(*args, api_name=api).result(timeout=1800))

    def breach(what: str, seen) -> None:
        with stats.lock:
            stats.isolation_breaches.append(f"visitor {v.wave}/{v.n} {what}: {seen}")

    try:
        sid = call("open", "", api="/on_load")[0]
        status = call("upload", [handle_file(str(path))], api="/on_upload")[0]
        rows = _rows(status)  # searchable (BM25) at once, indexed once its vectors are in (progressive index)
        if [r[0] for r in rows] != [v.file_name] or rows[0][1] not in ("searchable", "indexed"):
            with stats.lock:
                stats.errors.append(f"visitor {v.wave}/{v.n} upload status {rows}")
            return
        while True:
            out = call("ask", v.question, *v.options, api="/on_ask")
            answer_md, cands = out[1], out[6]  # after the status line: answer, chart, crop, page, why, candidates
            names = {r[1].rsplit(" — ", 1)[-1] for r in _rows(cands)}  # "title — file.pdf": the file name
            if names - {v.file_name}:
                breach("saw candidates from", names)
            with stats.lock:
                stats.asked += 1
                stats.right += f"## Answer: {v.letter}" in answer_md
            if time.monotonic() >= deadline:
                break
        docs = call("open", sid, api="/on_load")[1]
        listed = [r[0].rsplit(" — ", 1)[-1] for r in _rows(docs)]
        if listed != [v.file_name]:
            breach("library lists", listed)
    except Exception:  # counted in stats.errors by timed(); other visitors go on
        pass
    finally:
        c.close()


class Memory:
    """Samples the app's resident memory (its process tree) in the background."""

    def __init__(self, pid: int):
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def now(self) -> int:
        import psutil

        total = 0
        for p in [self.proc, *self.proc.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self.peak = max(self.peak, self.now())

    def stop(self) -> None:
        self._stop.set()
        self._t.join()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


def run(url: str, pid: int | None, clients: int, waves: int, seconds: float, seed: int = 1) -> dict:
    rng, stats = random.Random(seed), Stats()
    mem = Memory(pid) if pid else None
    after_wave = []
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for w in range(1, waves + 1):
            deadline = time.monotonic() + seconds
            threads = [threading.Thread(target=visit, args=(url, make_visitor(w, n, rng), Path(tmp), stats,
                                                    deadline)) for n in range(clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if mem:
                after_wave.append(mem.now())
    if mem:
        mem.stop()
    return {"clients": clients, "waves": waves, "seconds_per_wave": seconds,
            "wall_seconds": time.perf_counter() - t_start,
            "served": {k: len(v) for k, v in stats.latencies.items()},
            "latency": {k: {"p50": pct(v, 0.5), "p95": pct(v, 0.95)} for k, v in stats.latencies.items()},
            "errors": stats.errors, "isolation_breaches": stats.isolation_breaches,
            "answer_accuracy": stats.right / stats.asked if stats.asked else float("nan"), "asked": stats.asked,
            "peak_rss_mb": mem.peak / 1e6 if mem else None,
            "rss_after_wave_mb": [m / 1e6 for m in after_wave]}


def report(r: dict, note: str = "") -> str:
    lines = ["# Load on loopback", "", harness.stamp("bench.load", note.split()), "",
             f"{r['clients']} concurrent visitors per wave (`gradio_client`, one session each), {r['waves']} waves "
             f"of {r['seconds_per_wave']:g} s; each visitor uploads its own one-page PDF, asks about it until the "
             f"wave ends, lists its library and leaves. Wall time {r['wall_seconds']:.0f} s.", "",
             "| request | served | p50 s | p95 s |", "|---|---|---|---|"]
    for k in ("open", "upload", "ask"):
        if k in r["served"]:
            lines.append(f"| {k} | {r['served'][k]} | {r['latency'][k]['p50']:.1f} | {r['latency'][k]['p95']:.1f} |")
    lines += ["", f"- errors: {len(r['errors'])}" + "".join(f"\n  - {e}" for e in r["errors"][:10]),
              f"- isolation breaches (a visitor seeing another's document): {len(r['isolation_breaches'])}",
              f"- answers right: {r['answer_accuracy']:.3f} of {r['asked']}"]
    if r["peak_rss_mb"]:
        lines += [f"- app peak RSS: {r['peak_rss_mb']:.0f} MB; after each wave: "
                  + ", ".join(f"{m:.0f} MB" for m in r["rss_after_wave_mb"])]
    return "\n".join(lines) + "\n"


def run_app(clients: int, waves: int, seconds: float, env: dict[str, str] | None = None) -> dict:
    """Start ``python app.py`` with a fresh data directory (and ``env``), run the waves, stop it."""
    from tests.browser.harness import App

    with tempfile.TemporaryDirectory() as data:
        app = App(Path(data), Path(data) / "app.log", env=env)
        app.start()
        try:
            return run(app.url, app.proc.pid, clients, waves, seconds)
        finally:
            app.stop()


def growth(r: dict) -> float:
    """MB the app grew from the end of the first wave to the end of the last."""
    return r["rss_after_wave_mb"][-1] - r["rss_after_wave_mb"][0]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--waves", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=120, help="each visitor keeps asking for this long")
    ap.add_argument("--url", default=None, help="an app already running (memory is then not measured)")
    ap.add_argument("--baseline-env", action="append", default=[], metavar="KEY=VALUE",
                    help="first run the same load against an app started with these environment variables "
                         "(e.g. MALLOC_ARENA_MAX=16, glibc's default on 2 cores) and compare memory growth")
    ap.add_argument("--out", type=Path, default=Path("bench/load.md"))
    a = ap.parse_args(argv)
    note = f"--clients {a.clients} --waves {a.waves} --seconds {a.seconds:g}"
    if a.url:
        text = report(run(a.url, None, a.clients, a.waves, a.seconds), note)
    elif a.baseline_env:
        env = dict(kv.split("=", 1) for kv in a.baseline_env)
        note += "".join(f" --baseline-env {kv}" for kv in a.baseline_env)
        base = run_app(a.clients, a.waves, a.seconds, env)
        r = run_app(a.clients, a.waves, a.seconds)
        text = (report(r, note) + f"\n## Baseline: the same load, app started with {' '.join(a.baseline_env)}\n\n"
                + report(base).split("\n\n", 3)[-1]
                + f"\nMemory growth from the end of wave 1 to the end of wave {a.waves}: {growth(r):+.0f} MB "
                  f"vs {growth(base):+.0f} MB with the baseline's settings "
                  f"(peak {r['peak_rss_mb']:.0f} vs {base['peak_rss_mb']:.0f} MB).\n")
    else:
        text = report(run_app(a.clients, a.waves, a.seconds), note)
    a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
