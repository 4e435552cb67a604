import re
import time

import pymupdf
import pytest

from pipeline.documents import ingest
from pipeline.documents.ingest import Deadline, IngestError, _clean_pages, parse_pdf


def test_parse_generated_manual(manual_pdf):
    doc = parse_pdf(manual_pdf, "dir/manual.pdf")
    assert doc.name == "manual.pdf" and doc.n_pages >= 3 and len(doc.doc_hash) == 32
    text = "\n".join(p.markdown for p in doc.pages)
    # the running footer (with its page numbers) is gone from every page
    assert "Посібник користувача ·" not in text and "сторінка" not in text
    # headings are detected, the table is kept as text
    heads = [h[2] for p in doc.pages for h in p.headings]
    assert "3. Догляд і чищення" in heads and "4. Гарантія" in heads
    assert "4,5 літра" in text and "28 Вт" in text
    # nearly every character of a word in the Markdown maps to a real PDF word box
    for p in doc.pages:
        letters = [i for i, ch in enumerate(p.markdown) if ch.isalnum()]
        mapped = sum(1 for i in letters if p.word_at[i] >= 0)
        assert mapped / max(1, len(letters)) > 0.95
        for i in letters[:50]:
            w = p.words[p.word_at[i]]
            assert p.markdown[i].lower() in w[4].lower()


def test_same_bytes_same_hash(manual_pdf):
    assert parse_pdf(manual_pdf, "a.pdf").doc_hash == parse_pdf(manual_pdf, "b.pdf").doc_hash


@pytest.mark.parametrize("maker,message", [
    ("corrupt_pdf", "^bad.pdf: the PDF is damaged and cannot be read"),
    ("encrypted_pdf", "^bad.pdf: the PDF is password-protected$"),
    ("not_a_pdf", "^bad.pdf: not a PDF file$"),
    ("no_pages_pdf", "^bad.pdf: the PDF has no pages$"),
    ("blank_scan_pdf", r"^bad.pdf: no text found \(not even by OCR\)$"),
])
def test_bad_files_give_clear_errors(pdfgen, maker, message):
    with pytest.raises(IngestError, match=message):
        parse_pdf(getattr(pdfgen, maker)(), "bad.pdf")


def test_empty_file_and_page_limit(manual_pdf):
    with pytest.raises(IngestError, match="empty"):
        parse_pdf(b"", "e.pdf")
    with pytest.raises(IngestError, match=r"^m.pdf: \d+ pages is over the limit of 1 pages per document "
                                          r"\(PDFQA_MAX_PAGES\)$"):
        parse_pdf(manual_pdf, "m.pdf", max_pages=1)
    blank = pymupdf.open()
    blank.new_page()
    with pytest.raises(IngestError, match=r"^blank.pdf: no text found \(the pages are blank\)$"):
        parse_pdf(blank.tobytes(), "blank.pdf")


def test_clean_pages_drops_running_lines_only():
    words = ["перший", "другий", "третій", "четвертий", "п'ятий"]
    pages = [f"Заголовок сайту\nЦе {w} розділ тексту\n- {i} -" for i, w in enumerate(words, 1)]
    out = _clean_pages(pages, 0.6)
    assert all("Заголовок сайту" not in p and "- " not in p for p in out)
    assert out == [f"Це {w} розділ тексту" for w in words]


def test_clean_pages_keeps_templated_clauses_when_only_edges_can_run():
    """A rulebook clause differing only in numbers repeats on every page; with edge_lines it is kept."""
    pages = [f"Регламент змагань 2027\nСтаття {i}. Першість з виду {i}\n{i}.1. Терміни проведення: травень\n"
             f"{i}.2. Стартовий внесок становить {i}00 грн.\n{i}.3. Ще один пункт\n{i}.4. Останній пункт\n"
             f"сторінка {i} з 5" for i in range(1, 6)]
    old = _clean_pages(pages, 0.6)  # any line may be a running one: the clause is lost with the header
    assert not any("Стартовий внесок" in p for p in old)
    new = _clean_pages(pages, 0.6, edge_lines=2)
    assert all(f"{i}.2. Стартовий внесок становить {i}00 грн." in p for i, p in enumerate(new, 1))
    assert not any("Регламент змагань" in p or "сторінка" in p for p in new)


# ---- OCR of scanned pages ---------------------------------------------------------------
def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def test_scanned_pages_are_read_by_ocr_with_word_boxes(pdfgen):
    doc = parse_pdf(pdfgen.image_only_pdf(pages=2), "skan.pdf")
    assert doc.warnings == ["pages 1–2 read by OCR (ukr+eng)"]
    source = pymupdf.open("pdf", pdfgen.scan_source_pdf(pages=2))
    for page, (_, sentence) in zip(doc.pages, pdfgen._SAMPLE_TEXT):
        read = set(_words(" ".join(w[4] for w in page.words)))
        expected = _words(sentence)  # the known Ukrainian text on the scan
        assert sum(w in read for w in expected) >= 0.8 * len(expected)
        assert set(_words(page.markdown)) <= read
        # every letter of the page's Markdown maps to an OCR'd word box: highlighting works on scans
        letters = [i for i, ch in enumerate(page.markdown) if ch.isalnum()]
        assert sum(page.word_at[i] >= 0 for i in letters) > 0.95 * len(letters)
        # the boxes lie on the page, where each word was drawn (words drawn once on the page compared)
        drawn: dict[str, list] = {}
        for w in source[page.number - 1].get_text("words"):
            drawn.setdefault(w[4], []).append(w)
        near = []
        for x0, y0, x1, y1, text in page.words:
            assert 0 <= x0 < x1 <= page.width and 0 <= y0 < y1 <= page.height
            if len(drawn.get(text, [])) == 1:
                a = drawn[text][0]
                near.append(abs(x0 + x1 - a[0] - a[2]) / 2 < 4 and abs(y0 + y1 - a[1] - a[3]) / 2 < 4)
        assert len(near) >= 10 and sum(near) >= 0.9 * len(near)


def _text_then_scan(pdfgen, manual_pdf) -> bytes:
    doc = pymupdf.open("pdf", manual_pdf)
    doc.insert_pdf(pymupdf.open("pdf", pdfgen.image_only_pdf(pages=1)))
    return doc.tobytes()


def test_a_scanned_page_among_text_pages(pdfgen, manual_pdf):
    doc = parse_pdf(_text_then_scan(pdfgen, manual_pdf), "mixed.pdf")
    assert doc.warnings == [f"page {doc.n_pages} read by OCR (ukr+eng)"]
    assert "застосування описано" in doc.pages[-1].markdown
    assert "Догляд" in doc.pages[1].markdown


def test_without_tesseract_or_with_ocr_off_scans_say_why(pdfgen, manual_pdf, monkeypatch, tmp_path):
    scan = pdfgen.image_only_pdf(pages=1)
    with pytest.raises(IngestError, match=r"^skan.pdf: no text layer was found "
                                          r"\(a scanned or image-only PDF; OCR is off\)$"):
        parse_pdf(scan, "skan.pdf", ocr=False)
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))  # a folder without language data
    monkeypatch.setattr(ingest, "_DEBIAN_TESSDATA", [])
    with pytest.raises(IngestError, match=r"^skan.pdf: no text layer was found \(a scanned or image-only PDF; "
                                          r"OCR is unavailable: install tesseract-ocr and tesseract-ocr-ukr"):
        parse_pdf(scan, "skan.pdf")
    doc = parse_pdf(_text_then_scan(pdfgen, manual_pdf), "mixed.pdf")
    assert doc.warnings == [f"page {doc.n_pages}: no text; OCR is unavailable: "
                            "install tesseract-ocr and tesseract-ocr-ukr, or set TESSDATA_PREFIX"]


# ---- limits and hostile files -----------------------------------------------------------
@pytest.fixture(scope="module")
def pages_2000(pdfgen):
    return pdfgen.many_pages_pdf(2000)


def test_too_many_pages_are_refused_before_parsing(pages_2000):
    t0 = time.perf_counter()
    with pytest.raises(IngestError, match=r"^big.pdf: 2000 pages is over the limit of 1000 pages per document "
                                          r"\(PDFQA_MAX_PAGES\)$"):
        parse_pdf(pages_2000, "big.pdf", max_pages=1000)
    assert time.perf_counter() - t0 < 2.0  # ~1 ms here: only the page count is read


def test_2000_pages_parse_with_the_limit_raised(pdfgen, pages_2000):
    # parse only: ~6 s on 2 busy cores; embedding its 104 chunks with e5 takes ~2 more minutes there
    doc = parse_pdf(pages_2000, "big.pdf", max_pages=2000)
    assert doc.n_pages == 2000 and doc.warnings == []
    assert [p.markdown for p in doc.pages] == [pdfgen.many_pages_line(i) for i in range(1, 2001)]
    assert all(p.word_at[0] >= 0 for p in doc.pages)


def test_the_deadline_stops_parsing_between_batches(pages_2000):
    t0 = time.perf_counter()
    with pytest.raises(IngestError, match=r"^big.pdf: took longer than 0.3 s \(PDFQA_MAX_DOC_SECONDS\); "
                                          r"nothing was stored$"):
        parse_pdf(pages_2000, "big.pdf", max_pages=2000, deadline=Deadline("big.pdf", 0.3))
    assert time.perf_counter() - t0 < 3.0


def test_the_deadline_stops_ocr_between_pages(pdfgen, monkeypatch):
    calls = []
    ocr_page = ingest.ocr_page

    def slow_ocr(*args):
        calls.append(1)
        time.sleep(0.4)
        return ocr_page(*args)

    monkeypatch.setattr(ingest, "ocr_page", slow_ocr)
    with pytest.raises(IngestError, match=r"^skan.pdf: took longer than 0.5 s"):
        parse_pdf(pdfgen.image_only_pdf(pages=4), "skan.pdf", deadline=Deadline("skan.pdf", 0.5))
    assert 1 <= len(calls) < 4


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5, 0.7, 0.8, 0.9])
def test_a_truncated_pdf_gives_what_is_readable_or_a_clear_error(pdfgen, share):
    good = pdfgen.ukrainian_pdf("Обірваний документ", pdfgen._SAMPLE_TEXT * 6, pages_hint=4)
    try:
        doc = parse_pdf(good[: int(len(good) * share)], "cut.pdf")
    except IngestError as e:
        assert str(e).startswith("cut.pdf: the PDF is damaged")
    else:
        assert doc.warnings[0] == "the PDF was damaged and repaired: some text may be missing"
        assert "Ґрунтовні правила" in doc.pages[0].markdown


def test_the_first_half_of_a_pdf_whose_page_tree_comes_last_is_damaged_not_pageless(pdfgen):
    """Issue 50: a leaflet as word processors write it (the page tree after the contents) cut in half, as by an
    interrupted download: MuPDF rebuilds its cross-references and finds no page. That is a damaged file (it
    was read as "the PDF has no pages"); a whole file with an empty page tree still has no pages."""
    body = b"BT /F1 12 Tf 72 720 Td (text) Tj ET\n" * 400
    whole = pdfgen.write_objects([b"<< /Type /Catalog /Pages 3 0 R >>",
                                  b"<< /Length %d >>\nstream\n%sendstream" % (len(body), body),
                                  b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
                                  b"<< /Type /Page /Parent 3 0 R /MediaBox [0 0 595 842] /Contents 2 0 R >>"])
    assert pymupdf.open(stream=whole, filetype="pdf").page_count == 1
    with pytest.raises(IngestError, match=r"^cut.pdf: the PDF is damaged \(truncated or corrupt\)$"):
        ingest.open_pdf(whole[: len(whole) // 2], "cut.pdf")
    with pytest.raises(IngestError, match="^empty.pdf: the PDF has no pages$"):
        ingest.open_pdf(pdfgen.no_pages_pdf(), "empty.pdf")


def test_pages_of_absurd_size_never_make_giant_pictures(pdfgen, monkeypatch):
    sizes = []
    get_pixmap = pymupdf.Page.get_pixmap

    def spy(page, *args, **kwargs):
        pix = get_pixmap(page, *args, **kwargs)
        sizes.append(pix.width * pix.height)
        return pix

    monkeypatch.setattr(pymupdf.Page, "get_pixmap", spy)
    doc = parse_pdf(pdfgen.odd_sizes_pdf(), "odd.pdf")
    assert [(p.width, p.height) for p in doc.pages] == pdfgen.ODD_SIZES
    assert "Величезна сторінка з текстом" in doc.pages[0].markdown
    assert doc.warnings == ["pages 2–3: no text"]  # both pictures were read by OCR: nothing there
    assert max(sizes) <= ingest.OCR_MAX_PIXELS and len(sizes) >= 2


def test_javascript_and_attachments_are_ignored(pdfgen):
    doc = parse_pdf(pdfgen.scripted_pdf(), "js.pdf")
    text = "\n".join(p.markdown for p in doc.pages)
    assert "Кожен користувач має право" in text
    assert "alert" not in text and "Прихований текст" not in text and "run.exe" not in text
    assert doc.warnings == ["has 2 attached file(s), not read"]


def test_text_that_looks_like_markup_is_kept_as_text(pdfgen):
    md = parse_pdf(pdfgen.markup_text_pdf(), "markup.pdf").pages[0].markdown
    for line in pdfgen.MARKUP_LINES:
        assert line in md


@pytest.mark.parametrize("raw,safe", [
    ("../../etc/passwd.pdf", "passwd.pdf"),
    ("/etc/passwd.pdf", "passwd.pdf"),
    ("C:\\x\\y.pdf", "y.pdf"),
    ("..\\..\\boot.ini.pdf", "boot.ini.pdf"),
    ("a\x00b\x07c.pdf", "abc.pdf"),
    ("  звіт   №5 —\t2026.pdf ", "звіт №5 — 2026.pdf"),
    ("звіт №5 — 2026.pdf", "звіт №5 — 2026.pdf"),
    ("تقرير سنوي.pdf", "تقرير سنوي.pdf"),
    ("звіт 📄✅.pdf", "звіт 📄✅.pdf"),
    ("ї.pdf".replace("ї", "і\u0308"), "ї.pdf"),  # NFC
    ("invoice\u202efdp.exe", "invoicefdp.exe"),  # a right-to-left override would show it as "exe.pdf"
    ("bad\udcff.pdf", "bad.pdf"),  # a lone surrogate (undecodable bytes) cannot be stored
    ("", "document.pdf"), ("../", "document.pdf"), ("..", "document.pdf"), ("\x00\x01", "document.pdf"),
    (".pdf", "document.pdf"),
])
def test_safe_name(raw, safe):
    assert ingest.safe_name(raw) == safe


def test_safe_name_keeps_long_names_short_with_their_extension():
    name = ingest.safe_name("д" * 1000 + ".pdf")
    assert len(name) == 120 and name == "д" * 116 + ".pdf"
    assert len(ingest.safe_name("x" * 1000)) == 120


def test_italic_words_are_aligned_to_their_pdf_words():
    # pymupdf4llm writes italics as "_Дорослим:_"; the underscore must not stop the word matching its box
    doc = pymupdf.open()
    page = doc.new_page()
    tw = pymupdf.TextWriter(page.rect)
    tw.append((72, 100), "Дорослим:", font=pymupdf.Font("heit"), fontsize=11)
    tw.append((140, 100), "внутрішньом’язово по 200 мг.", font=pymupdf.Font("helv"), fontsize=11)
    tw.write_text(page)
    p = parse_pdf(doc.tobytes(), "i.pdf").pages[0]
    assert "_Дорослим:_" in p.markdown
    start = p.markdown.index("Дорослим")
    assert {p.word_at[c] for c in range(start, start + len("Дорослим"))} == {0}
    assert p.words[0][4] == "Дорослим:"
