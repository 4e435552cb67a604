"""Stage 3 — the library: documents, chunks, a chromadb vector store and a BM25 index.

Layout under ``root``: ``library.sqlite`` (documents, pages with word boxes,
chunks) and ``chroma/`` (the embedded Chroma store), or, with a Chroma server
configured (``chroma_url``), the vectors on that server (``pipeline.chroma_client``).
A document is listed only once all of it is stored: its vectors go into Chroma
first, then its rows in one SQLite transaction; vectors of a document that
never got listed (a crash in between) are swept away on open. Reopening costs
no re-embedding; the BM25 index is rebuilt in memory from the stored chunk text.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .chroma_client import open_collection
from .chunking import TokenCounter, chunk_document
from .embedders import Embedder
from .ingest import Deadline, IngestError, check_size, file_hash, parse_pdf, safe_name
from .settings import Settings
from .text import normalize
from .types import Chunk, Page

Progress = Callable[[str, float], None]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (doc_hash TEXT PRIMARY KEY, name TEXT, n_pages INTEGER, n_chunks INTEGER,
    added REAL, warnings TEXT);
CREATE TABLE IF NOT EXISTS pages (doc_hash TEXT, number INTEGER, width REAL, height REAL, markdown TEXT,
    words TEXT, spans TEXT, headings TEXT, PRIMARY KEY (doc_hash, number));
CREATE TABLE IF NOT EXISTS chunks (chunk_id TEXT PRIMARY KEY, doc_hash TEXT, idx INTEGER, heading TEXT,
    body TEXT, prefix TEXT, spans TEXT);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks (doc_hash, idx);
"""


@dataclass
class DocInfo:
    doc_hash: str
    name: str
    n_pages: int
    n_chunks: int
    warnings: list[str]
    duplicate: bool = False
    seconds: float = 0.0


def _word_spans(word_at: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for i, w in enumerate(word_at):
        if w < 0:
            continue
        if out and out[-1][2] == w and out[-1][1] == i:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1, w])
    return out


def _word_at(spans: list[list[int]], n: int) -> list[int]:
    at = [-1] * n
    for s, e, w in spans:
        at[s:e] = [w] * (e - s)
    return at


class Library:
    def __init__(self, root: Path | str, embedder: Embedder, settings: Settings):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.embedder = embedder
        self.count = TokenCounter(embedder.count_word_tokens)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.root / "library.sqlite", check_same_thread=False)
        self._db.executescript(_SCHEMA)
        self._check_fingerprint(settings.fingerprint())
        # vectors: the embedded Chroma under root, or the Chroma server at settings.chroma_url
        self._col = open_collection(self.root, settings, self._db)
        # close() releases the embedded store only (a server's client is shared by every library)
        self._chroma_path = None if settings.chroma_url else str(self.root / "chroma")
        self._files = self.root / "files"
        self._bm25 = None
        self._bm25_ids: list[str] = []
        self._sweep()

    # ---- consistency -------------------------------------------------
    def _check_fingerprint(self, fp: str) -> None:
        """Chunks and vectors depend on the chunking and embedding settings: one library, one fingerprint."""
        row = self._db.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()
        if row is None:
            with self._db:
                self._db.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (fp,))
        elif row[0] != fp:
            raise ValueError(f"the library at {self.root} was built with chunking/embedding settings {row[0]!r}, "
                             f"not {fp!r}: use another data directory or the same settings")

    def _sweep(self) -> None:
        """Remove vectors of documents that were never fully listed."""
        listed = {r[0] for r in self._db.execute("SELECT doc_hash FROM documents")}
        stored = self._col.get(include=["metadatas"])
        orphans = [i for i, m in zip(stored["ids"], stored["metadatas"]) if m.get("doc_hash") not in listed]
        if orphans:
            self._col.delete(ids=orphans)
        self._db.execute("DELETE FROM chunks WHERE doc_hash NOT IN (SELECT doc_hash FROM documents)")
        self._db.execute("DELETE FROM pages WHERE doc_hash NOT IN (SELECT doc_hash FROM documents)")
        self._db.commit()
        if self._files.exists():
            for f in self._files.iterdir():
                if f.stem not in listed:
                    f.unlink(missing_ok=True)

    def close(self) -> None:
        """Release the SQLite connection and this library's embedded Chroma system (best effort)."""
        self._db.close()
        try:  # chromadb keeps one system per path in a process-wide cache; stop and forget ours
            from chromadb.api.shared_system_client import SharedSystemClient

            system = SharedSystemClient._identifier_to_system.pop(self._chroma_path, None)
            SharedSystemClient._identifier_to_refcount.pop(self._chroma_path, None)
            if system is not None:
                system.stop()
        except Exception:  # a newer chromadb may manage this differently; nothing is lost
            pass

    def pdf_path(self, doc_hash: str) -> Path:
        """The stored copy of a document's PDF (kept for rendering its pages)."""
        return self._files / f"{doc_hash}.pdf"

    # ---- documents ---------------------------------------------------
    def documents(self) -> list[DocInfo]:
        rows = self._db.execute("SELECT doc_hash, name, n_pages, n_chunks, warnings FROM documents ORDER BY added")
        return [DocInfo(h, n, p, c, json.loads(w)) for h, n, p, c, w in rows]

    def find(self, doc_hash: str) -> DocInfo | None:
        return next((d for d in self.documents() if d.doc_hash == doc_hash), None)

    def _check_room(self, name: str) -> None:
        n = self._db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        if n >= self.settings.max_documents:
            raise IngestError(f"{name}: the library already holds {n} documents, the limit (PDFQA_MAX_DOCUMENTS); "
                              "remove one to add another")

    def add(self, data: bytes, name: str, progress: Progress | None = None) -> DocInfo:
        """Parse, chunk, embed and store one PDF; raises :class:`IngestError` for a bad file or a limit reached."""
        t0 = time.perf_counter()
        s = self.settings
        name = safe_name(name)
        deadline = Deadline(name, s.max_doc_seconds)
        say = progress or (lambda stage, frac: None)
        check_size(name, len(data), s.max_upload_mb)
        h = file_hash(data)
        known = self.find(h)
        if known:
            known.duplicate = True
            return known
        self._check_room(name)
        say("parse", 0.0)
        doc = parse_pdf(data, name, max_pages=s.max_pages, repeated_line_share=s.repeated_line_share,
                        edge_lines=s.running_edge_lines,
                        ocr=s.ocr, ocr_languages=s.ocr_languages, ocr_dpi=s.ocr_dpi, deadline=deadline)
        say("chunk", 0.3)
        chunks = chunk_document(doc, self.count, chunk_tokens=s.chunk_tokens, overlap=s.chunk_overlap,
                                prefix_tokens=s.prefix_tokens, use_prefix=s.use_prefix)
        if not chunks:
            raise IngestError(f"{name}: no text to index")
        vectors = []
        for i in range(0, len(chunks), s.embed_batch):
            deadline.check()
            say("embed", 0.35 + 0.6 * i / len(chunks))
            vectors.append(self.embedder.embed_passages([c.embed_text() for c in chunks[i:i + s.embed_batch]]))
        emb = np.concatenate(vectors)
        say("store", 0.97)
        with self._lock:
            self._check_room(name)  # another thread may have filled the library meanwhile
            self._files.mkdir(exist_ok=True)
            tmp = self._files / f".{h}.tmp"
            tmp.write_bytes(data)
            tmp.replace(self.pdf_path(h))
            self._col.upsert(ids=[c.chunk_id for c in chunks], embeddings=emb.tolist(),
                             metadatas=[{"doc_hash": h, "idx": c.index} for c in chunks])
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO pages VALUES (?,?,?,?,?,?,?,?)",
                    [(h, p.number, p.width, p.height, p.markdown, json.dumps(p.words, ensure_ascii=False),
                      json.dumps(_word_spans(p.word_at)), json.dumps(p.headings, ensure_ascii=False)) for p in doc.pages])
                self._db.executemany(
                    "INSERT OR REPLACE INTO chunks VALUES (?,?,?,?,?,?,?)",
                    [(c.chunk_id, h, c.index, c.heading, c.body, c.prefix, json.dumps(c.spans)) for c in chunks])
                self._db.execute("INSERT OR REPLACE INTO documents VALUES (?,?,?,?,?,?)",
                                 (h, doc.name, doc.n_pages, len(chunks), time.time(), json.dumps(doc.warnings)))
            self._bm25 = None
        say("indexed", 1.0)
        return DocInfo(h, doc.name, doc.n_pages, len(chunks), doc.warnings, seconds=time.perf_counter() - t0)

    def remove(self, doc_hash: str) -> bool:
        with self._lock:
            with self._db:
                n = self._db.execute("DELETE FROM documents WHERE doc_hash=?", (doc_hash,)).rowcount
            self._col.delete(where={"doc_hash": doc_hash})
            self._sweep()
            self._bm25 = None
        return n > 0

    # ---- reading -----------------------------------------------------
    def _chunk(self, row) -> Chunk:
        cid, h, idx, heading, body, prefix, spans, name = row
        return Chunk(cid, h, name, idx, heading, body, prefix, [tuple(s) for s in json.loads(spans)])

    _CHUNK_SQL = ("SELECT c.chunk_id, c.doc_hash, c.idx, c.heading, c.body, c.prefix, c.spans, d.name "
                  "FROM chunks c JOIN documents d USING (doc_hash)")

    def chunks(self, ids: list[str]) -> list[Chunk]:
        if not ids:
            return []
        q = ",".join("?" * len(ids))
        got = {r[0]: self._chunk(r) for r in self._db.execute(f"{self._CHUNK_SQL} WHERE c.chunk_id IN ({q})", ids)}
        return [got[i] for i in ids if i in got]

    def chunks_of(self, doc_hash: str) -> list[Chunk]:
        return [self._chunk(r) for r in self._db.execute(f"{self._CHUNK_SQL} WHERE c.doc_hash=? ORDER BY c.idx", (doc_hash,))]

    def page(self, doc_hash: str, number: int) -> Page | None:
        r = self._db.execute("SELECT number, width, height, markdown, words, spans, headings FROM pages "
                             "WHERE doc_hash=? AND number=?", (doc_hash, number)).fetchone()
        if r is None:
            return None
        num, w, hgt, md, words, spans, heads = r
        return Page(num, w, hgt, md, [tuple(x) for x in json.loads(words)], _word_at(json.loads(spans), len(md)),
                    [tuple(x) for x in json.loads(heads)])

    def n_chunks(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]

    # ---- search ------------------------------------------------------
    def embeddings(self, ids: list[str]) -> np.ndarray:
        got = self._col.get(ids=ids, include=["embeddings"])
        by_id = dict(zip(got["ids"], got["embeddings"]))
        return np.asarray([by_id[i] for i in ids], dtype=np.float32)

    def dense_search(self, qvec: np.ndarray, k: int) -> dict[str, float]:
        n = self._col.count()
        if n == 0:
            return {}
        r = self._col.query(query_embeddings=[qvec.tolist()], n_results=min(k, n), include=["distances"])
        return {i: 1.0 - d for i, d in zip(r["ids"][0], r["distances"][0])}

    def _lexical(self):
        with self._lock:
            if self._bm25 is None:
                import bm25s

                rows = self._db.execute("SELECT chunk_id, heading, body FROM chunks ORDER BY doc_hash, idx").fetchall()
                self._bm25_ids = [r[0] for r in rows]
                self._bm25 = bm25s.BM25()
                if rows:
                    norm = self.settings.lexical_norm
                    self._bm25.index([normalize(f"{h}\n{b}", norm) or ["_"] for _, h, b in rows], show_progress=False)
            return self._bm25, self._bm25_ids

    def lexical_scores(self, text: str) -> dict[str, float]:
        """BM25 score of every chunk for ``text``."""
        bm25, ids = self._lexical()
        if not ids:
            return {}
        toks = normalize(text, self.settings.lexical_norm)
        scores = bm25.get_scores(toks) if toks else np.zeros(len(ids))
        return dict(zip(ids, scores.tolist()))
