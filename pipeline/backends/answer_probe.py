"""One answer path tried in a child process (``python -m pipeline.backends.answer_probe``): what
``pipeline.backends.answer_path`` measures, out of the app's process, so that a path that crashes (SIGILL in a
kernel the CPU or the VM does not run, a segmentation fault) kills only this child.

``convert FORMAT`` makes the model file of a format (once; llama.cpp's own quantizer, from the shipped Q4_K_M) and
prints its path. ``probe JSON`` loads ``{"file", "extra", "seconds"}``, answers the fixed check (its letters; the first answer warms
the model up, the others are timed), then its questions again, timed, until ``seconds`` are spent (each prompt read
anew), and prints one line ``PROBE {…}``: the letters, the prompt tokens read per second, seconds per answer, peak
memory, the CPU kernels that ran (``ggml_cpu``: ``native``, or a portable build's variant), llama.cpp's system info.

``race JSON`` loads ``{"paths": [{"name", "file", "extra"}, …], "seconds"}`` together (paths that ran alone) and
times them in turns, and prints ``RACE {name: {"tokens_per_s", "runs"}}``.

``PDFQA_PROBE_CRASH`` (tests only): a comma-separated list of path names whose child raises SIGILL after loading
the model, as llama.cpp's AMX path does on the first decode where its tiles are not set up.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time

from ..types import Candidate, Chunk, Question

# ---- the fixed check: facts stated in one passage, each answered by its letter; its answers after the first are
# also the timed ones (a prompt of ~350 tokens each: the system prompt, one passage, the question, the options)
CHECK = [
    (Question("check-1", "Якого кольору дах ратуші в місті Вербівка?",
              ["синього", "червоного", "зеленого", "чорного", "жовтого", "білого"]),
     "Ратуша міста Вербівка має жовтий дах, який видно з усіх пагорбів довкола.", "E"),
    (Question("check-2", "Яка потужність зволожувача «Росинка-7»?",
              ["12 Вт", "20 Вт", "28 Вт", "35 Вт", "40 Вт", "50 Вт"]),
     "Потужність зволожувача «Росинка-7» становить 28 Вт, рівень шуму — 26 дБ, об'єм резервуара — 4,5 літра.", "C"),
]


def passage(body: str) -> Candidate:
    return Candidate(Chunk("check:1", "check", "check.pdf", 1, "Розділ", body, "Посібник", [(1, 0, len(body))]), {}, 1)


def crash_if_asked(name: str) -> None:
    if name and name in [x.strip() for x in os.environ.get("PDFQA_PROBE_CRASH", "").split(",")]:
        signal.signal(signal.SIGILL, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGILL)


def probe(file: str, extra: bool, seconds: float, name: str = "") -> dict:
    import llama_cpp

    from ..settings import load_settings
    from .ggml_cpu import load
    from .llama_cpp import LlamaCppAnswerer

    load()

    settings = load_settings()
    t0 = time.perf_counter()
    ans = LlamaCppAnswerer(file, settings, extra=extra)
    load_s = time.perf_counter() - t0
    crash_if_asked(name)

    def fresh():
        ans.llm.n_tokens, ans._last = 0, None  # the prompt is read anew: nothing reused from the cache

    letters, top, tokens, spent, runs = [], [], 0, 0.0, []
    i = 0
    while i < len(CHECK) or spent < seconds or not runs:  # the check once; then again, timed, until ``seconds``
        q, text, _ = CHECK[i % len(CHECK)]
        fresh()
        t = time.perf_counter()
        s = ans.score(q, [passage(text)])
        if i:  # the first answer warms the model up (pages, buffers): not timed
            runs.append(time.perf_counter() - t)
            tokens += s.prompt_tokens
            spent += runs[-1]
        if i < len(CHECK):
            best = max(s.probabilities, key=s.probabilities.get)
            letters.append(best)
            top.append(round(s.probabilities[best], 4))
        i += 1
    return {"letters": "".join(letters), "top": top, "tokens_per_s": tokens / spent, "runs": len(runs),
            "seconds_per_answer": sorted(runs)[len(runs) // 2], "prompt_tokens": round(tokens / len(runs)),
            "load_s": round(load_s, 2), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "cpu_variant": ans.cpu_variant,  # llama.cpp's CPU kernels that ran (ggml_cpu)
            "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip()}


def race(paths: list[dict], seconds: float) -> dict:
    """The candidates that ran alone, loaded together and timed in turns (each round every one answers the same
    question, the first to go rotating), so that whatever else runs on the machine weighs on each alike: each
    one's prompt tokens per second over at least ``seconds`` of answers."""
    from ..settings import load_settings
    from .llama_cpp import LlamaCppAnswerer

    settings = load_settings()
    models = [(p["name"], LlamaCppAnswerer(p["file"], settings, extra=bool(p["extra"]))) for p in paths]

    def once(ans, k: int) -> tuple[int, float]:
        q, text, _ = CHECK[k % len(CHECK)]
        ans.llm.n_tokens, ans._last = 0, None
        t = time.perf_counter()
        s = ans.score(q, [passage(text)])
        return s.prompt_tokens, time.perf_counter() - t

    for _, a in models:
        once(a, 0)  # warm-up, not timed
    stats = {name: [0, 0.0, 0] for name, _ in models}
    r = 0
    while (r < 1 or any(st[1] < seconds for st in stats.values())) and r < 20:
        for name, a in models[r % len(models):] + models[:r % len(models)]:
            tok, dt = once(a, r + 1)
            stats[name][0] += tok
            stats[name][1] += dt
            stats[name][2] += 1
        r += 1
    return {name: {"tokens_per_s": tok / spent, "runs": n} for name, (tok, spent, n) in stats.items()}


def main(argv: list[str]) -> int:
    if argv[:1] == ["convert"] and len(argv) == 2:
        from .shipped import format_file

        print("FILE " + str(format_file(argv[1])), flush=True)
        return 0
    if argv[:1] == ["probe"] and len(argv) == 2:
        a = json.loads(argv[1])
        print("PROBE " + json.dumps(probe(a["file"], bool(a["extra"]), float(a["seconds"]), a.get("name", ""))),
              flush=True)
        return 0
    if argv[:1] == ["race"] and len(argv) == 2:
        a = json.loads(argv[1])
        print("RACE " + json.dumps(race(a["paths"], float(a["seconds"]))), flush=True)
        return 0
    print("usage: python -m pipeline.backends.answer_probe convert FORMAT | probe JSON | race JSON", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
