"""The PDF generators (testkit/pdfgen.py) and the bundled sample corpus (assets/sample)."""
from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pymupdf
import pytest

from testkit import pdfgen

ROOT = Path(__file__).resolve().parent.parent

pymupdf.TOOLS.mupdf_display_errors(False)

SPECIAL = "Ґанок, ґудзик і їжак: є сім’я, «лапки», № 5 — та ін."


def _long(tag: str, n: int = 14) -> str:
    """A long paragraph of distinct sentences, so every part of it is unique in the document."""
    return " ".join(f"Пункт {tag}.{k}: громада ухвалила рішення про благоустрій подвір’я; ґрунтові доріжки "
                    f"замінять плиткою, а біля їдальні з’явиться альтанка для мешканців і їхніх гостей."
                    for k in range(1, n + 1))


SECTIONS = [
    ("1. Загальні положення", f"{SPECIAL}\n{_long('1')}"),
    ("2. Порядок робіт", f"{_long('2a')}\n{_long('2b')}"),
    ("3. Технічні дані", "Основні параметри наведено в таблиці."),
    ("4. Прикінцеві положення", _long('4')),
]
TABLE = [["Параметр", "Значення"], ["Довжина доріжки", "120 м"], ["Ширина", "1,5 м"],
         ["Примітка", "Роботи виконуються з травня по вересень, у робочі дні з 8:00 до 17:00"]]
FOOTER = "Документ ТОВ «Приклад»"


def _open(data: bytes) -> pymupdf.Document:
    return pymupdf.open(stream=data, filetype="pdf")


@pytest.fixture(scope="module")
def doc_bytes() -> bytes:
    return pdfgen.ukrainian_pdf("Звіт про благоустрій подвір’я", SECTIONS, footer=FOOTER,
                                table=TABLE, table_after=2)


@pytest.fixture(scope="module")
def pages(doc_bytes) -> list[str]:
    with _open(doc_bytes) as doc:
        return [p.get_text() for p in doc]


def _body(pages: list[str]) -> str:
    """All page text without the footer lines, whitespace-normalized."""
    n = len(pages)
    return pdfgen.normalize(" ".join(t.replace(pdfgen.footer_text(FOOTER, i + 1, n), " ")
                                     for i, t in enumerate(pages)))


def test_is_a4_multipage_with_embedded_fonts(doc_bytes):
    assert doc_bytes.startswith(b"%PDF-")
    with _open(doc_bytes) as doc:
        assert doc.page_count >= 3
        assert not doc.needs_pass
        for page in doc:
            assert round(page.rect.width) == 595 and round(page.rect.height) == 842
            fonts = page.get_fonts()
            assert fonts and all(f[1] != "n/a" for f in fonts)  # embedded, not base-14 references


def test_footer_on_every_page(pages):
    n = len(pages)
    for i, text in enumerate(pages):
        assert pdfgen.footer_text(FOOTER, i + 1, n) in text
        assert f"сторінка {i + 1} з {n}" in text


def test_text_round_trips(pages):
    body = _body(pages)
    assert SPECIAL in pages[0]  # short line, printed unchanged on one line
    assert body.startswith("Звіт про благоустрій подвір’я 1. Загальні положення")
    for heading, text in SECTIONS:
        assert heading in body
        for para in text.splitlines():
            assert pdfgen.normalize(para) in body
    for row in TABLE:
        for cell in row:
            assert cell in body
    assert not any(ch in body for ch in "\ufffd\x00")


def test_some_paragraph_spans_a_page_break(pages):
    n = len(pages)
    texts = [pdfgen.normalize(t.replace(pdfgen.footer_text(FOOTER, i + 1, n), " ")) for i, t in enumerate(pages)]
    split = []
    for para in (pdfgen.normalize(p) for _, body in SECTIONS for p in body.splitlines() if p.strip()):
        if any(para in t for t in texts):
            continue  # wholly on one page
        split += [i for i in range(n - 1) if para[:50] in texts[i] and para[-50:] in texts[i + 1]
                  and para in f"{texts[i]} {texts[i + 1]}"]
    assert split, "no paragraph crosses a page break"


def test_headings_are_bold_and_larger(doc_bytes):
    with _open(doc_bytes) as doc:
        spans = [s for b in doc[0].get_text("dict")["blocks"] for line in b.get("lines", []) for s in line["spans"]]
    head = next(s for s in spans if s["text"].startswith("1. Загальні положення"))
    body = next(s for s in spans if s["text"].startswith("Ґанок"))
    assert head["size"] > body["size"]
    assert head["flags"] & pymupdf.TEXT_FONT_BOLD or "Bold" in head["font"]


def test_table_has_ruling_lines(doc_bytes):
    with _open(doc_bytes) as doc:
        page = next(p for p in doc if "Довжина доріжки" in p.get_text())
        assert len(page.get_drawings()) >= 4
        assert any(t.row_count >= 3 for t in page.find_tables().tables)


def test_no_footer_and_pages_hint():
    data = pdfgen.ukrainian_pdf("Коротка довідка", [("Вступ", "Один абзац."), ("Кінець", "Ще один.")],
                                footer=None)
    with _open(data) as doc:
        assert doc.page_count == 1
        assert "сторінка" not in doc[0].get_text()
    data = pdfgen.ukrainian_pdf("Коротка довідка", [("Вступ", "Один абзац."), ("Кінець", "Ще один.")],
                                pages_hint=3)
    with _open(data) as doc:
        assert doc.page_count == 3
        for i, page in enumerate(doc):
            assert pdfgen.footer_text(pdfgen.DEFAULT_FOOTER, i + 1, 3) in page.get_text()


def test_deterministic(doc_bytes):
    again = pdfgen.ukrainian_pdf("Звіт про благоустрій подвір’я", SECTIONS, footer=FOOTER,
                                 table=TABLE, table_after=2)
    assert again == doc_bytes


def test_corrupt_pdf():
    data = pdfgen.corrupt_pdf()
    assert data.startswith(b"%PDF-")
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except (pymupdf.FileDataError, RuntimeError):
        return
    assert doc.page_count == 0


def test_encrypted_pdf():
    data = pdfgen.encrypted_pdf(user_pw="1234")
    with _open(data) as doc:
        assert doc.needs_pass and doc.is_encrypted
        assert not doc.authenticate("wrong")
    with _open(data) as doc:
        assert doc.authenticate("1234")
        assert "AES" in doc.metadata["encryption"] and "256" in doc.metadata["encryption"]
        assert "Захищений документ" in doc[0].get_text()


def test_image_only_pdf():
    data = pdfgen.image_only_pdf(pages=2)
    with _open(data) as doc:
        assert doc.page_count == 2 and not doc.needs_pass
        for page in doc:
            assert page.get_text().strip() == ""
            assert page.get_images()
            assert not page.get_fonts()


def test_not_a_pdf():
    data = pdfgen.not_a_pdf()
    assert not data.startswith(b"%PDF")
    with pytest.raises((pymupdf.FileDataError, RuntimeError)):
        pymupdf.open(stream=data, filetype="pdf")


def test_hostile_generators():
    with _open(pdfgen.no_pages_pdf()) as doc:
        assert doc.page_count == 0 and not doc.is_repaired
    with _open(pdfgen.many_pages_pdf(45)) as doc:
        assert doc.page_count == 45 and doc[44].get_text().strip() == pdfgen.many_pages_line(45)
    assert len({pdfgen.many_pages_line(i).split(":")[1] for i in range(1, 2001)}) == 2000
    with _open(pdfgen.odd_sizes_pdf()) as doc:
        assert [(p.rect.width, p.rect.height) for p in doc] == pdfgen.ODD_SIZES
        assert [bool(p.get_images()) for p in doc] == [False, True, True]
    with _open(pdfgen.scripted_pdf()) as doc:
        assert "/JavaScript" in doc.xref_object(int(doc.xref_get_key(doc.pdf_catalog(), "OpenAction")[1].split()[0]))
        assert "/JavaScript" in doc.xref_object(doc[0].annot_xrefs()[0][0]) and doc.embfile_count() == 2
    with _open(pdfgen.markup_text_pdf()) as doc:
        assert all(line in doc[0].get_text() for line in pdfgen.MARKUP_LINES)
    with _open(pdfgen.blank_scan_pdf()) as doc:
        assert doc[0].get_images() and not doc[0].get_text().strip()
    assert pdfgen.truncated_pdf() == pdfgen.truncated_pdf() and not pdfgen.truncated_pdf().rstrip().endswith(b"%%EOF")


# --- bundled sample corpus ----------------------------------------------------

SAMPLE = ROOT / "assets" / "sample"
COLUMNS = ["Question_ID", "Domain", "N_Pages", "Question", "A", "B", "C", "D", "E", "F",
           "Correct_Answer", "Doc_ID", "Page_Num"]


def _make_sample():
    spec = importlib.util.spec_from_file_location("make_sample", ROOT / "assets" / "make_sample.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sample_rows() -> list[dict]:
    with open(SAMPLE / "questions.csv", encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def test_sample_questions_match_documents(sample_rows):
    assert 10 <= len(sample_rows) <= 16
    assert {r["Correct_Answer"] for r in sample_rows} == set("ABCDEF")
    assert len({r["Question_ID"] for r in sample_rows}) == len(sample_rows)
    pdfs = sorted(SAMPLE.glob("*.pdf"))
    assert 3 <= len(pdfs) <= 4
    assert sum(p.stat().st_size for p in SAMPLE.iterdir()) < 1_000_000
    for r in sample_rows:
        assert all(r[L] for L in "ABCDEF") and len({r[L] for L in "ABCDEF"}) == 6
        with pymupdf.open(SAMPLE / r["Doc_ID"]) as doc:
            assert doc.page_count == int(r["N_Pages"])
            assert 2 <= doc.page_count <= 8
            assert 1 <= int(r["Page_Num"]) <= doc.page_count


def test_sample_is_up_to_date(tmp_path, sample_rows):
    """Regenerating the corpus gives the same questions, gold pages and page texts."""
    make_sample = _make_sample()
    assert make_sample.main(["--out", str(tmp_path)]) == 0
    with open(tmp_path / "questions.csv", encoding="utf-8", newline="") as f:
        assert list(csv.DictReader(f)) == sample_rows
    for new in tmp_path.glob("*.pdf"):
        with pymupdf.open(new) as a, pymupdf.open(SAMPLE / new.name) as b:
            assert [p.get_text() for p in a] == [p.get_text() for p in b]
    for (doc, _, _, _, _, evidence), r in zip(make_sample.QUESTIONS, sample_rows):
        with pymupdf.open(SAMPLE / r["Doc_ID"]) as pdf:
            page = pdfgen.normalize(pdf[int(r["Page_Num"]) - 1].get_text()).lower()
        assert r["Doc_ID"] == doc["file"]
        assert pdfgen.normalize(evidence).lower() in page
