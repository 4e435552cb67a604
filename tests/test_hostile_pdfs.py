"""Hostile and broken PDFs in one batch with good ones: each bad file gets a clear message, the rest is indexed."""
from __future__ import annotations

import sqlite3
import time

import pytest

from pipeline.index import Library
from pipeline.documents.ingest import IngestError, parse_pdf
from pipeline.settings import load_settings


def add_all(lib: Library, files: dict[str, bytes]) -> tuple[dict, dict[str, str]]:
    """Add every file, as the upload and the folder batch do: an IngestError is that file's message, nothing else."""
    indexed, failed = {}, {}
    for name, data in files.items():
        try:
            indexed[name] = lib.add(data, name)
        except IngestError as e:
            failed[name] = str(e)
    return indexed, failed


@pytest.fixture(scope="module")
def batch(tmp_path_factory, embedder, pdfgen, manual_pdf, other_pdf):
    files = {
        "good.pdf": manual_pdf,
        "truncated.pdf": pdfgen.truncated_pdf(),
        "text.pdf": pdfgen.not_a_pdf(),
        "locked.pdf": pdfgen.encrypted_pdf(),
        "no-pages.pdf": pdfgen.no_pages_pdf(),
        "scan.pdf": pdfgen.image_only_pdf(pages=1),
        "blank-scan.pdf": pdfgen.blank_scan_pdf(),
        "odd-sizes.pdf": pdfgen.odd_sizes_pdf(),
        "scripted.pdf": pdfgen.scripted_pdf(),
        "markup.pdf": pdfgen.markup_text_pdf(),
        "bomb.pdf": pdfgen.bomb_pdf(),
        "bombs.pdf": pdfgen.bomb_pdf(pages=40),
        "good-again.pdf": manual_pdf,
        "other.pdf": other_pdf,
    }
    lib = Library(tmp_path_factory.mktemp("hostile"), embedder, load_settings())
    indexed, failed = add_all(lib, files)
    yield lib, indexed, failed
    lib.close()


def test_bad_files_fail_with_their_own_message(batch):
    _, _, failed = batch
    assert failed == {
        "truncated.pdf": "truncated.pdf: the PDF is damaged and no text could be read from it",
        "text.pdf": "text.pdf: not a PDF file",
        "locked.pdf": "locked.pdf: the PDF is password-protected",
        "no-pages.pdf": "no-pages.pdf: the PDF has no pages",
        "blank-scan.pdf": "blank-scan.pdf: no text found (not even by OCR)",
        "bomb.pdf": BOMB.format("bomb.pdf"),
        "bombs.pdf": BOMB.format("bombs.pdf"),
    }


BOMB = ("{}: page 1 holds over 50 MB of drawing instructions once decompressed, over the limit per page "
        "(PDFQA_MAX_PAGE_CONTENT_MB); nothing was read")


def test_a_decompression_bomb_is_refused_in_a_moment(pdfgen):
    """300 MB of drawing instructions in a 0.8 MB file (MuPDF would interpret them for 36 s and more): refused
    after inflating the 50 MB limit, whether the file holds one such page or forty."""
    limit = load_settings().limits.max_page_content_mb
    for pages in (1, 40):
        data = pdfgen.bomb_pdf(pages=pages)
        assert len(data) < 1_000_000
        t = time.perf_counter()
        with pytest.raises(IngestError) as e:
            parse_pdf(data, "bomb.pdf", max_page_content_mb=limit)
        assert time.perf_counter() - t < 2.0
        assert str(e.value) == BOMB.format("bomb.pdf")
    # under the limit, the same kind of page is parsed, and its text is read
    small = pdfgen.bomb_pdf(inflated_mb=1)
    assert parse_pdf(small, "small.pdf", max_page_content_mb=limit).pages[0].markdown.strip() == pdfgen.BOMB_TEXT
    with pytest.raises(IngestError, match="^small.pdf: page 1 holds over 0.5 MB"):
        parse_pdf(small, "small.pdf", max_page_content_mb=0.5)


def test_everything_else_is_indexed(batch):
    lib, indexed, _ = batch
    assert list(indexed) == ["good.pdf", "scan.pdf", "odd-sizes.pdf", "scripted.pdf", "markup.pdf",
                             "good-again.pdf", "other.pdf"]
    assert [d.name for d in lib.documents()] == ["good.pdf", "scan.pdf", "odd-sizes.pdf", "scripted.pdf",
                                                  "markup.pdf", "other.pdf"]
    warnings = {d.name: d.warnings for d in lib.documents()}
    assert warnings == {"good.pdf": [], "scan.pdf": ["page 1 read by OCR (ukr+eng)"],
                        "odd-sizes.pdf": ["pages 2–3: no text"], "scripted.pdf": ["has 2 attached file(s), not read"],
                        "markup.pdf": [], "other.pdf": []}
    # the stored copies are named by hash, one per document
    stored = sorted(p.name for p in (lib.root / "files").iterdir())
    assert stored == sorted(f"{d.doc_hash}.pdf" for d in lib.documents())


def test_the_same_file_twice_is_stored_once(batch):
    lib, indexed, _ = batch
    first, again = indexed["good.pdf"], indexed["good-again.pdf"]
    assert again.duplicate and again.doc_hash == first.doc_hash and again.name == "good.pdf"
    assert len(lib.chunks_of(first.doc_hash)) == first.n_chunks
    assert lib.vectors._col.count() == lib.n_chunks() == sum(d.n_chunks for d in lib.documents())


def test_scanned_text_is_searchable_and_highlightable(batch):
    lib, indexed, _ = batch
    h = indexed["scan.pdf"].doc_hash
    body = " ".join(c.body for c in lib.chunks_of(h))
    assert "застосування описано нижче" in body
    page = lib.page(h, 1)
    assert page.words and sum(w >= 0 for w in page.word_at) > 0.8 * sum(ch.isalnum() for ch in page.markdown)


def test_markup_is_kept_as_text_in_chunks(batch, pdfgen):
    lib, indexed, _ = batch
    text = "\n".join(c.body for c in lib.chunks_of(indexed["markup.pdf"].doc_hash))
    for line in pdfgen.MARKUP_LINES:
        assert line in text


def test_javascript_and_attachments_stay_out_of_the_index(batch):
    lib, indexed, _ = batch
    text = "\n".join(c.body for c in lib.chunks_of(indexed["scripted.pdf"].doc_hash))
    assert "Кожен користувач має право" in text
    assert "alert" not in text and "Прихований текст" not in text


HOSTILE_NAMES = {
    "../../../etc/cron.d/x.pdf": "x.pdf",
    "/etc/passwd.pdf": "passwd.pdf",
    "C:\\x\\y.pdf": "y.pdf",
    "nul\x00byte.pdf": "nulbyte.pdf",
    "з" * 1000 + ".pdf": "з" * 116 + ".pdf",
    "звіт №5 — 2026.pdf": "звіт №5 — 2026.pdf",
    "تقرير.pdf": "تقرير.pdf",
    "🙂 emoji.pdf": "🙂 emoji.pdf",
    "bad\udcffbytes.pdf": "badbytes.pdf",
}


def test_file_names_are_made_safe_and_never_become_paths(tmp_path, embedder, pdfgen):
    lib = Library(tmp_path / "lib", embedder, load_settings())
    files = {raw: pdfgen.many_pages_pdf(k) for k, raw in enumerate(HOSTILE_NAMES, 1)}  # distinct small PDFs
    indexed, failed = add_all(lib, files)
    assert failed == {}
    assert [indexed[raw].name for raw in HOSTILE_NAMES] == list(HOSTILE_NAMES.values())
    assert [d.name for d in lib.documents()] == list(HOSTILE_NAMES.values())
    # nothing was written outside the library, and inside it only hash-named copies
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib"]
    assert all(len(p.stem) == 32 for p in (tmp_path / "lib" / "files").iterdir())
    names = [r[0] for r in sqlite3.connect(tmp_path / "lib" / "library.sqlite").execute("SELECT name FROM documents")]
    assert names == list(HOSTILE_NAMES.values())
    with pytest.raises(IngestError, match="^y.pdf: not a PDF file$"):  # messages name the safe name
        lib.add(b"hello", "C:\\x\\y.pdf")
    lib.close()
