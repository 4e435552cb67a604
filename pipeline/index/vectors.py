"""The vector index: chunk vectors in the embedded Chroma in the library folder, or on a Chroma server.

Without ``settings.store.chroma_url`` nothing changes: ``<root>/chroma`` holds an
embedded ``PersistentClient`` and the collection ``chunks-<fingerprint>``.

With ``settings.store.chroma_url`` (``PDFQA_CHROMA_URL=http://host:8000``) the
vectors go to that server (``chromadb.HttpClient``); everything else stays in
the library folder: ``library.sqlite`` (documents, pages with word boxes, chunk
text) and ``files/`` (the PDFs). One server holds many libraries (one per web
session, one per app replica), so a library's collection is named after it:
``chunks-<fingerprint>-<library id>``, the id made once and kept in the
library's own SQLite (``DocumentStore.library_id``). Consistency: a document's
rows are listed first (one transaction), then its vectors are written batch by
batch, each batch marked in SQLite after it is written; on open, vectors of
documents never listed are swept away, and a library whose marked chunks have
lost their vectors (a reset or different server) is refused with a clear
message rather than answered from half an index.

Search is exact while a library is small (``exact_search_max`` chunks, the
default covers a few thousand pages): the vectors are read once into memory and
compared by one matrix product, so the same question over the same library
always gets the same chunks (HNSW's graph depends on insertion order and
threads, and changed one answer in 170 between two loads of one library).
Larger libraries, and a Chroma server, use Chroma's HNSW search.

Removal removes (embedded store): Chroma keeps a deleted vector on disk, in its write-ahead log
(``embeddings_queue`` in ``chroma.sqlite3``) until the HNSW index is next saved (a library under the save
threshold never is), in the saved index itself (marked deleted, not erased), in free SQLite pages, and, once its
collection is deleted, in the collection's old folder (Chroma leaves it: its issue #5259). So after a document's
vectors are deleted the collection is written anew from the vectors that remain, the folders of segments Chroma
no longer lists are removed, and Chroma's own ``chroma vacuum`` purges its log and compacts its SQLite
(:meth:`VectorIndex.compact`). On a Chroma server that is the server's own housekeeping (its operator's
``chroma vacuum``).
"""
from __future__ import annotations

import logging
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from ..errors import BackendUnavailable, LibraryMismatch
from ..settings import Settings


log = logging.getLogger(__name__)
_SEGMENT_DIR = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Chroma's own maintenance command (its CLI, in the chromadb wheel): purge the write-ahead log, VACUUM the SQLite
_VACUUM = "import sys, chromadb_rust_bindings as c; c.cli(['chroma', 'vacuum', '--path', sys.argv[1], '--force'])"


def http_client(url: str):
    import chromadb

    u = urlparse(url if "://" in url else f"http://{url}")
    if u.scheme not in ("http", "https") or not u.hostname:
        raise BackendUnavailable(f"chroma_url must look like http://host:port, not {url!r}")
    port = u.port or (443 if u.scheme == "https" else 8000)
    try:
        client = chromadb.HttpClient(host=u.hostname, port=port, ssl=u.scheme == "https",
                                     settings=chromadb.Settings(anonymized_telemetry=False))
        client.heartbeat()
    except Exception as e:
        raise BackendUnavailable(f"the Chroma server at {url} cannot be reached: {e}") from None
    return client


Exact = tuple[list[str], np.ndarray, list[str]]  # chunk ids (sorted), their unit vectors, their documents


def _sorted(ids: list[str], vecs: np.ndarray, docs: list[str]) -> Exact:
    """The exact-search copy: rows in chunk-id order (so ties never depend on insertion), vectors normalised."""
    order = np.argsort(np.asarray(ids, dtype=object), kind="stable").astype(int)
    vecs = vecs[order]
    return ([ids[i] for i in order], vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12),
            [docs[i] for i in order])


def _merged(old: Exact, ids: list[str], vecs: np.ndarray, doc_hash: str) -> Exact:
    """``old`` with ``ids`` upserted (an id written again replaces its row)."""
    new = set(ids)
    keep = [i for i, c in enumerate(old[0]) if c not in new]
    width = old[1].shape[1] if old[1].size else vecs.shape[1]
    return _sorted([old[0][i] for i in keep] + list(ids),
                   np.concatenate([old[1][keep].reshape(len(keep), width), vecs.reshape(len(ids), width)]),
                   [old[2][i] for i in keep] + [doc_hash] * len(ids))


def _without(old: Exact, doc_hash: str) -> Exact:
    keep = [i for i, d in enumerate(old[2]) if d != doc_hash]
    return [old[0][i] for i in keep], old[1][keep], [old[2][i] for i in keep]


class VectorIndex:
    """One library's chunk vectors (cosine), with the id of their document in each one's metadata."""

    def __init__(self, root: Path, settings: Settings, library_id, n_listed: int):
        """``library_id()`` names the collection on a server; ``n_listed`` (marked) chunks must have vectors here."""
        import chromadb

        fp = settings.fingerprint()
        if settings.store.chroma_url:
            client, name, where = http_client(settings.store.chroma_url), f"chunks-{fp}-{library_id()}", settings.store.chroma_url
            self._path = None  # a server's client is shared by every library: nothing to release on close
        else:
            client = chromadb.PersistentClient(path=str(root / "chroma"),
                                               settings=chromadb.Settings(anonymized_telemetry=False))
            name, where = f"chunks-{fp}", str(root / "chroma")
            self._path = where
        self._exact_max = 0 if settings.store.chroma_url else settings.store.exact_search_max
        self._exact: Exact | None = None  # ids, unit vectors and documents, read on first search
        self._exact_lock = threading.Lock()  # held by a write to the copy and by the read that makes it
        self._client, self._name = client, name
        self._col = client.get_or_create_collection(name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
        if self._col.count() < n_listed:
            raise LibraryMismatch(
                f"the library at {root} lists {n_listed} chunks but the vector store at {where} holds "
                f"{self._col.count()} of its vectors (collection {name!r}): point PDFQA_CHROMA_URL at the store "
                f"that holds them, or use a new data directory and index again")

    def add(self, ids: list[str], vectors: np.ndarray, doc_hash: str, indices: list[int]) -> None:
        self._col.upsert(ids=ids, embeddings=vectors.tolist(),
                         metadatas=[{"doc_hash": doc_hash, "idx": i} for i in indices])
        self._changed(keep=lambda old: _merged(old, ids, np.asarray(vectors, dtype=np.float32), doc_hash))

    def remove_document(self, doc_hash: str) -> None:
        self._col.delete(where={"doc_hash": doc_hash})
        self._changed(keep=lambda old: _without(old, doc_hash))
        self.compact()

    def compact(self) -> None:
        """Leave no deleted vector anywhere on disk (embedded store; see the module's notes): the collection
        written anew from the vectors that remain, the folders of segments Chroma no longer lists removed, then
        Chroma's own vacuum (log purge, SQLite VACUUM). A removal of a large library costs one re-write of its
        vectors (about a second per few thousand)."""
        if self._path is None:
            return
        got = self._col.get(include=["embeddings", "metadatas"])
        self._client.delete_collection(self._name)
        self._col = self._client.create_collection(self._name, metadata={"hnsw:space": "cosine"},
                                                   embedding_function=None)
        for i in range(0, len(got["ids"]), 1000):
            self._col.add(ids=got["ids"][i:i + 1000], embeddings=got["embeddings"][i:i + 1000],
                          metadatas=got["metadatas"][i:i + 1000])
        root = Path(self._path)
        try:
            with sqlite3.connect(f"file:{root / 'chroma.sqlite3'}?mode=ro", uri=True) as db:
                listed = {r[0] for r in db.execute("SELECT id FROM segments")}
        except sqlite3.Error as e:  # a Chroma whose tables differ: its folders are left as they are
            log.warning("Chroma's segments not read in %s: %s", root, e)
            listed = None
        for d in root.iterdir() if listed is not None else []:
            if d.is_dir() and _SEGMENT_DIR.fullmatch(d.name) and d.name not in listed:
                shutil.rmtree(d, ignore_errors=True)
        done = subprocess.run([sys.executable, "-c", _VACUUM, str(root)], capture_output=True, text=True, timeout=600)
        if done.returncode:
            log.warning("Chroma's vacuum failed in %s (a removed document's vectors may stay in its free pages "
                        "until the next removal): %s", root, (done.stderr or done.stdout)[-500:])

    def sweep(self, listed: set[str]) -> None:
        """Remove the vectors of documents that are not listed (a crash between vectors and rows)."""
        stored = self._col.get(include=["metadatas"])
        orphans = [i for i, m in zip(stored["ids"], stored["metadatas"]) if m.get("doc_hash") not in listed]
        if orphans:
            self._col.delete(ids=orphans)
            self._changed()
            self.compact()

    def get(self, ids: list[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those of ``ids`` that have one (a document still embedding lacks some)."""
        if not ids:
            return {}
        got = self._col.get(ids=ids, include=["embeddings"])
        return {i: np.asarray(v, dtype=np.float32) for i, v in zip(got["ids"], got["embeddings"])}

    def present(self, ids: list[str]) -> set[str]:
        """Those of ``ids`` that have a stored vector."""
        return set(self._col.get(ids=ids, include=[])["ids"]) if ids else set()

    def search(self, qvec: np.ndarray, k: int) -> dict[str, float]:
        """The ``k`` nearest chunks' cosine similarity to ``qvec``."""
        n = self._col.count()
        if n == 0:
            return {}
        if n <= self._exact_max:
            return self._exact_search(qvec, k)
        r = self._col.query(query_embeddings=[qvec.tolist()], n_results=min(k, n), include=["distances"])
        return {i: 1.0 - d for i, d in zip(r["ids"][0], r["distances"][0])}

    def _changed(self, keep=None) -> None:
        """After a write: the in-memory copy for exact search is updated by ``keep(copy)`` (an add or a removal,
        so a search during background embedding does not re-read every vector), or dropped (read again)."""
        with self._exact_lock:
            self._exact = keep(self._exact) if keep is not None and self._exact is not None else None

    def _exact_search(self, qvec: np.ndarray, k: int) -> dict[str, float]:
        """Every stored vector against ``qvec``; ties broken by chunk id, so the result never varies."""
        with self._exact_lock:
            cached = self._exact
            if cached is None:  # read once, then kept up to date by every write (``_changed``)
                got = self._col.get(include=["embeddings", "metadatas"])
                docs = [m.get("doc_hash", "") for m in got["metadatas"]]
                cached = _sorted(got["ids"], np.asarray(got["embeddings"], dtype=np.float32).reshape(len(docs), -1),
                                 docs)
                self._exact = cached
            ids, vecs, _ = cached
        if not ids:
            return {}
        q = np.asarray(qvec, dtype=np.float32)
        sims = vecs @ (q / max(float(np.linalg.norm(q)), 1e-12))
        top = np.argsort(-sims, kind="stable")[:k]
        return {ids[i]: float(sims[i]) for i in top}

    def close(self) -> None:
        """Release this library's embedded Chroma system (best effort)."""
        try:  # chromadb keeps one system per path in a process-wide cache; stop and forget ours
            from chromadb.api.shared_system_client import SharedSystemClient

            system = SharedSystemClient._identifier_to_system.pop(self._path, None)
            SharedSystemClient._identifier_to_refcount.pop(self._path, None)
            if system is not None:
                system.stop()
        except Exception:  # a newer chromadb may manage this differently; nothing is lost
            pass
