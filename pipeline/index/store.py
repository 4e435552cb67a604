"""The document store: documents, pages (with word boxes) and chunk text in SQLite, and the PDFs on disk.

Layout under ``root``: ``library.sqlite`` and ``files/<hash>.pdf``. A document
is listed (``documents`` row) only once all of it is stored, in one
transaction with its pages and chunks; :meth:`DocumentStore.sweep` removes
what a crash left half-written (rows and files of documents never listed).

Each chunk row says whether its vector is stored (``embedded``): a listed
document is ``searchable`` (BM25) as soon as its rows are committed and
``indexed`` once every chunk has its vector (the embedding runs in the
background, see :class:`~pipeline.index.library.Library`); the flag is set
only after the vector is written, so a crash never marks a chunk that has none.
"""
from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..errors import LibraryMismatch
from ..types import Chunk, Document, Page

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (doc_hash TEXT PRIMARY KEY, name TEXT, n_pages INTEGER, n_chunks INTEGER,
    added REAL, warnings TEXT);
CREATE TABLE IF NOT EXISTS pages (doc_hash TEXT, number INTEGER, width REAL, height REAL, markdown TEXT,
    words TEXT, spans TEXT, headings TEXT, PRIMARY KEY (doc_hash, number));
CREATE TABLE IF NOT EXISTS chunks (chunk_id TEXT PRIMARY KEY, doc_hash TEXT, idx INTEGER, heading TEXT,
    body TEXT, prefix TEXT, spans TEXT, embedded INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks (doc_hash, idx);
"""

_CHUNK_SQL = ("SELECT c.chunk_id, c.doc_hash, c.idx, c.heading, c.body, c.prefix, c.spans, d.name "
              "FROM chunks c JOIN documents d USING (doc_hash)")


@dataclass
class DocInfo:
    doc_hash: str
    name: str
    n_pages: int
    n_chunks: int
    warnings: list[str]
    duplicate: bool = False
    seconds: float = 0.0
    n_embedded: int = -1  # chunks with their vector stored (-1: all of them)

    @property
    def state(self) -> str:
        """``indexed`` (every chunk has its vector) or ``searchable`` (BM25 only while it embeds)."""
        return "searchable" if 0 <= self.n_embedded < self.n_chunks else "indexed"
    title: str = ""  # for people (pipeline.documents.titles); the file name is ``name``


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


def _chunk(row) -> Chunk:
    cid, h, idx, heading, body, prefix, spans, name = row
    return Chunk(cid, h, name, idx, heading, body, prefix, [tuple(s) for s in json.loads(spans)])


class DocumentStore:
    def __init__(self, root: Path, fingerprint: str):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.root / "library.sqlite", check_same_thread=False)
        # SQLite's own: a deleted row's bytes are overwritten, not left in free pages (a removed document's text
        # is gone from the file, not only unlisted)
        self.db.execute("PRAGMA secure_delete = ON")
        self.db.executescript(_SCHEMA)
        if "embedded" not in {r[1] for r in self.db.execute("PRAGMA table_info(chunks)")}:
            # a library made before progressive indexing listed a document only with all its vectors
            with self.db:
                self.db.execute("ALTER TABLE chunks ADD COLUMN embedded INTEGER NOT NULL DEFAULT 1")
        self._files = self.root / "files"
        self._check_fingerprint(fingerprint)
        self._add_titles()

    def _add_titles(self) -> None:
        """The ``title`` column (libraries made before it get it), filled for documents that lack one
        from the stored PDF's metadata and first two pages."""
        from ..documents.titles import title_of

        if "title" not in {r[1] for r in self.db.execute("PRAGMA table_info(documents)")}:
            with self.db:
                self.db.execute("ALTER TABLE documents ADD COLUMN title TEXT DEFAULT ''")
        todo = self.db.execute("SELECT doc_hash, name FROM documents WHERE title IS NULL OR title=''").fetchall()
        for h, name in todo:
            md = [r[0] for r in self.db.execute(
                "SELECT markdown FROM pages WHERE doc_hash=? ORDER BY number LIMIT 2", (h,))]
            pdf = self.pdf_path(h)
            try:
                title = title_of(pdf.read_bytes() if pdf.exists() else None, md, name)
            except Exception:  # noqa: BLE001 - a title is a nicety: never stops a library from opening
                title = ""
            with self.db:
                self.db.execute("UPDATE documents SET title=? WHERE doc_hash=?", (title or name, h))

    def _check_fingerprint(self, fp: str) -> None:
        """Chunks and vectors depend on the chunking and embedding settings: one library, one fingerprint."""
        row = self.db.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()
        if row is None:
            with self.db:
                self.db.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (fp,))
        elif row[0] != fp:
            raise LibraryMismatch(f"the library at {self.root} was built with chunking/embedding settings "
                                  f"{row[0]!r}, not {fp!r}: use another data directory or the same settings")

    def library_id(self) -> str:
        """This library's id, made once and kept (it names its collection on a shared vector server)."""
        row = self.db.execute("SELECT value FROM meta WHERE key='library_id'").fetchone()
        if row:
            return row[0]
        with self.db:
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('library_id', ?)", (uuid.uuid4().hex[:16],))
        return self.db.execute("SELECT value FROM meta WHERE key='library_id'").fetchone()[0]

    def close(self) -> None:
        self.db.close()

    # ---- documents -----------------------------------------------------------
    def documents(self) -> list[DocInfo]:
        rows = self.db.execute(
            "SELECT doc_hash, name, n_pages, n_chunks, warnings, "
            "(SELECT COUNT(*) FROM chunks c WHERE c.doc_hash=d.doc_hash AND c.embedded), title FROM documents d "
            "ORDER BY added")
        return [DocInfo(h, n, p, c, json.loads(w), n_embedded=e, title=t or "") for h, n, p, c, w, e, t in rows]

    def find(self, doc_hash: str) -> DocInfo | None:
        return next((d for d in self.documents() if d.doc_hash == doc_hash), None)

    def n_documents(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]

    def listed(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT doc_hash FROM documents")}

    def n_embedded_chunks(self) -> int:
        """Chunks of listed documents whose vectors are stored (the vector index must hold at least these)."""
        return self.db.execute("SELECT COUNT(*) FROM chunks WHERE embedded AND doc_hash IN "
                               "(SELECT doc_hash FROM documents)").fetchone()[0]

    # ---- progressive indexing: chunks still without a vector ---------------------------
    def pending(self, limit: int = -1) -> list[Chunk]:
        """Chunks of listed documents without a stored vector, oldest document first, in chunk order."""
        return [_chunk(r) for r in self.db.execute(
            f"{_CHUNK_SQL} WHERE NOT c.embedded ORDER BY d.added, c.doc_hash, c.idx LIMIT ?", (limit,))]

    def n_pending(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM chunks WHERE NOT embedded AND doc_hash IN "
                               "(SELECT doc_hash FROM documents)").fetchone()[0]

    def listed_chunks(self, ids: list[str]) -> list[str]:
        """Those of ``ids`` that still belong to a listed document."""
        q = ",".join("?" * len(ids))
        got = {r[0] for r in self.db.execute(f"SELECT chunk_id FROM chunks WHERE chunk_id IN ({q}) AND doc_hash IN "
                                             "(SELECT doc_hash FROM documents)", ids)}
        return [i for i in ids if i in got]

    def mark_embedded(self, ids: list[str]) -> None:
        """Record that these chunks' vectors are stored (call only after writing them)."""
        with self.db:
            self.db.executemany("UPDATE chunks SET embedded=1 WHERE chunk_id=?", [(i,) for i in ids])

    def pdf_path(self, doc_hash: str) -> Path:
        """The stored copy of a document's PDF (kept for rendering its pages)."""
        return self._files / f"{doc_hash}.pdf"

    def save_pdf(self, doc_hash: str, data: bytes) -> None:
        self._files.mkdir(exist_ok=True)
        tmp = self._files / f".{doc_hash}.tmp"
        tmp.write_bytes(data)
        tmp.replace(self.pdf_path(doc_hash))

    def save(self, doc: Document, chunks: list[Chunk]) -> None:
        """List a document with its pages and chunks (none embedded yet), in one transaction."""
        h = doc.doc_hash
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO pages VALUES (?,?,?,?,?,?,?,?)",
                [(h, p.number, p.width, p.height, p.markdown, json.dumps(p.words, ensure_ascii=False),
                  json.dumps(_word_spans(p.word_at)), json.dumps(p.headings, ensure_ascii=False)) for p in doc.pages])
            self.db.executemany(
                "INSERT OR REPLACE INTO chunks VALUES (?,?,?,?,?,?,?,0)",
                [(c.chunk_id, h, c.index, c.heading, c.body, c.prefix, json.dumps(c.spans)) for c in chunks])
            self.db.execute("INSERT OR REPLACE INTO documents (doc_hash, name, n_pages, n_chunks, added, warnings, "
                            "title) VALUES (?,?,?,?,?,?,?)", (h, doc.name, doc.n_pages, len(chunks), time.time(),
                                                             json.dumps(doc.warnings), doc.title or doc.name))

    def unlist(self, doc_hash: str) -> bool:
        with self.db:
            return self.db.execute("DELETE FROM documents WHERE doc_hash=?", (doc_hash,)).rowcount > 0

    def sweep(self) -> None:
        """Remove the pages, chunks and files of documents that are not listed."""
        listed = self.listed()
        self.db.execute("DELETE FROM chunks WHERE doc_hash NOT IN (SELECT doc_hash FROM documents)")
        self.db.execute("DELETE FROM pages WHERE doc_hash NOT IN (SELECT doc_hash FROM documents)")
        self.db.commit()
        if self._files.exists():
            for f in self._files.iterdir():
                if f.stem not in listed:
                    f.unlink(missing_ok=True)

    # ---- reading -----------------------------------------------------------------
    def chunks(self, ids: list[str]) -> list[Chunk]:
        if not ids:
            return []
        q = ",".join("?" * len(ids))
        got = {r[0]: _chunk(r) for r in self.db.execute(f"{_CHUNK_SQL} WHERE c.chunk_id IN ({q})", ids)}
        return [got[i] for i in ids if i in got]

    def chunks_of(self, doc_hash: str) -> list[Chunk]:
        return [_chunk(r) for r in self.db.execute(f"{_CHUNK_SQL} WHERE c.doc_hash=? ORDER BY c.idx", (doc_hash,))]

    def chunk_texts(self) -> list[tuple[str, str, str]]:
        """(chunk id, heading, body) of every chunk, in document and chunk order (the lexical index's input)."""
        return self.db.execute("SELECT chunk_id, heading, body FROM chunks ORDER BY doc_hash, idx").fetchall()

    def page(self, doc_hash: str, number: int) -> Page | None:
        r = self.db.execute("SELECT number, width, height, markdown, words, spans, headings FROM pages "
                            "WHERE doc_hash=? AND number=?", (doc_hash, number)).fetchone()
        if r is None:
            return None
        num, w, hgt, md, words, spans, heads = r
        return Page(num, w, hgt, md, [tuple(x) for x in json.loads(words)], _word_at(json.loads(spans), len(md)),
                    [tuple(x) for x in json.loads(heads)])

    def n_chunks(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
