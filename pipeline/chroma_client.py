"""Where a library's vectors live: the embedded Chroma in its folder, or a Chroma server.

Without ``settings.chroma_url`` nothing changes: ``<root>/chroma`` holds an
embedded ``PersistentClient`` and the collection ``chunks-<fingerprint>``.

With ``settings.chroma_url`` (``PDFQA_CHROMA_URL=http://host:8000``) the
vectors go to that server (``chromadb.HttpClient``); everything else stays in
the library folder: ``library.sqlite`` (documents, pages with word boxes, chunk
text) and ``files/`` (the PDFs). One server holds many libraries (one per web
session, one per app replica), so a library's collection is named after it:
``chunks-<fingerprint>-<library id>``, the id made once and kept in the
library's own SQLite. Consistency is unchanged: vectors are written first,
then the SQLite rows in one transaction; on open, vectors of documents never
listed are swept away, and a library whose listed chunks have lost their
vectors (a reset or different server) is refused with a clear message rather
than answered from half an index.
"""
from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from urllib.parse import urlparse

from .settings import Settings


def library_id(db: sqlite3.Connection) -> str:
    row = db.execute("SELECT value FROM meta WHERE key='library_id'").fetchone()
    if row:
        return row[0]
    lid = uuid.uuid4().hex[:16]
    with db:
        db.execute("INSERT OR IGNORE INTO meta VALUES ('library_id', ?)", (lid,))
    return db.execute("SELECT value FROM meta WHERE key='library_id'").fetchone()[0]


def http_client(url: str):
    import chromadb

    u = urlparse(url if "://" in url else f"http://{url}")
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"chroma_url must look like http://host:port, not {url!r}")
    port = u.port or (443 if u.scheme == "https" else 8000)
    try:
        client = chromadb.HttpClient(host=u.hostname, port=port, ssl=u.scheme == "https",
                                     settings=chromadb.Settings(anonymized_telemetry=False))
        client.heartbeat()
    except Exception as e:
        raise ConnectionError(f"the Chroma server at {url} cannot be reached: {e}") from None
    return client


def open_collection(root: Path, settings: Settings, db: sqlite3.Connection):
    """The chunk-vector collection of the library at ``root``, embedded or on the configured server."""
    import chromadb

    fp = settings.fingerprint()
    if settings.chroma_url:
        client, name, where = http_client(settings.chroma_url), f"chunks-{fp}-{library_id(db)}", settings.chroma_url
    else:
        client = chromadb.PersistentClient(path=str(root / "chroma"),
                                           settings=chromadb.Settings(anonymized_telemetry=False))
        name, where = f"chunks-{fp}", str(root / "chroma")
    col = client.get_or_create_collection(name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
    listed = db.execute("SELECT COUNT(*) FROM chunks WHERE doc_hash IN (SELECT doc_hash FROM documents)").fetchone()[0]
    if col.count() < listed:
        raise ValueError(f"the library at {root} lists {listed} chunks but the vector store at {where} holds "
                         f"{col.count()} of its vectors (collection {name!r}): point PDFQA_CHROMA_URL at the store "
                         f"that holds them, or use a new data directory and index again")
    return col
