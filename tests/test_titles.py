"""Document titles from real generated PDFs, parsed by the real ingest stage."""
from __future__ import annotations

import pymupdf
import pytest

from pipeline.documents.ingest import parse_pdf
from pipeline.documents.titles import MAX_CHARS, belongs, shorten, title_of, usable
from testkit import pdfgen

TITLE = "Порядок зберігання архівних документів"
SECTIONS = [("Загальні положення", "Документи зберігають у сухому приміщенні при температурі до 20 °C."),
            ("Відповідальність", "За зберігання відповідає архіваріус установи.")]


def _with_metadata_title(data: bytes, title: str | None) -> bytes:
    doc = pymupdf.open("pdf", data)
    meta = dict(doc.metadata or {})
    meta["title"] = title or ""
    doc.set_metadata({k: v for k, v in meta.items() if k != "format" and k != "encryption"})
    return doc.tobytes(no_new_id=True)


def _plain_lines_pdf(lines: list[str], title: str | None = None) -> bytes:
    """One page of lines all in one font size: no Markdown headings."""
    doc = pymupdf.open()
    pdfgen._text_page(doc, lines)
    doc.set_metadata({"title": title or ""})
    return doc.tobytes()


@pytest.fixture(scope="module")
def leaflet() -> bytes:
    return pdfgen.ukrainian_pdf(TITLE, SECTIONS)


def test_metadata_title_is_used(leaflet):
    doc = parse_pdf(_with_metadata_title(leaflet, "Архів: правила зберігання"), "a1b2.pdf")
    assert doc.title == "Архів: правила зберігання"
    assert doc.name == "a1b2.pdf"  # the file name stays what it was


def test_long_metadata_title_is_cut_at_a_clause():
    meta = ("КОФЕЇН-БЕНЗОАТ НАТРІЮ, інструкція, застосування препарату КОФЕЇН-БЕНЗОАТ НАТРІЮ таблетки по 200 мг, "
            "по 10 у блістерах; по 1 блістеру в пачці з картону")  # a real leaflet's metadata title
    data = _with_metadata_title(pdfgen.ukrainian_pdf("Кофеїн", SECTIONS), meta)
    assert title_of(data, [], "x.pdf") == "КОФЕЇН-БЕНЗОАТ НАТРІЮ, інструкція"


@pytest.mark.parametrize("junk", [
    "Microsoft Word - Інструкція.doc", "Microsoft PowerPoint - слайди", "untitled", "Untitled Document",
    "Без назви", "", "   ", "leaflet.pdf", "leaflet", "report_final_v2.docx", "scan0001", "Document1",
    "4e779acee13fa6e0763fb33d1c83030b8e6ea33d", "C:\\Users\\ivan\\Documents\\Звіт.docx",
    "/home/ivan/out/zvit", "þÿ\x04\x10\x04\x11", "\ufffd\ufffd\ufffd", "12.03.2024", "---", "<b></b>",
])
def test_junk_metadata_falls_back_to_the_first_heading(leaflet, junk):
    doc = parse_pdf(_with_metadata_title(leaflet, junk), "leaflet.pdf")
    assert doc.title == TITLE


def test_no_heading_gives_the_first_meaningful_line():
    data = _plain_lines_pdf(["12", "2024", "Протокол засідання вченої ради факультету",
                             "Присутні: 14 членів ради."], title="untitled")
    doc = parse_pdf(data, "p.pdf")
    assert not any(line.startswith("#") for line in doc.pages[0].markdown.splitlines())  # really no heading
    assert doc.title == "Протокол засідання вченої ради факультету"


def test_a_one_word_first_line_takes_the_next_lines_up_to_a_label():
    data = _plain_lines_pdf(["ІНСТРУКЦІЯ", "для медичного застосування препарату", "АМОКСИЦИЛІН", "Склад:",
                             "діюча речовина: амоксицилін; 1 капсула містить 500 мг."])
    assert parse_pdf(data, "a.pdf").title == "ІНСТРУКЦІЯ для медичного застосування препарату АМОКСИЦИЛІН"


def test_hostile_metadata_is_cleaned_and_bounded(leaflet):
    meta = "Порядок\u202e зберігання\x00 документів\n\n" + "архівних " * 2000  # words of the document's own
    doc = parse_pdf(_with_metadata_title(leaflet, meta), "z.pdf")
    assert doc.title.startswith("Порядок зберігання документів архівних") and doc.title.endswith("…")
    assert len(doc.title) <= MAX_CHARS and not any(c in doc.title for c in "\u202e\x00\n")


def test_markdown_and_damaged_input():
    # no PDF (or a damaged one): the Markdown is enough; markers and tags are not part of a title
    assert title_of(None, ["# **Річний** _звіт_ <sup>®</sup>\n\nТекст."]) == "Річний звіт®"
    assert title_of(b"not a pdf at all", ["Вступ до курсу\nТекст"]) == "Вступ до курсу"
    # the most important heading wins over an earlier, smaller one
    assert title_of(None, ["### Додаток 3\n\n# Положення про конкурс\n\n## Розділ 1"]) == "Положення про конкурс"
    # nothing usable: the file name's stem, or nothing
    assert title_of(None, ["123\n\n456"], name="scans/scan_0001.pdf") == "scan_0001"
    assert title_of(None, [], "") == ""


def test_usable_and_shorten_rules():
    assert usable("Парацетамол") and usable("Annual report 2023") and usable("Закон України «Про освіту»")
    assert not usable("IMG_2024") and not usable("x.doc") and not usable("Звіт", file_name="Звіт.pdf")
    # mojibake: UTF-8 read as Latin-1 (PyMuPDF heals this one when it is written into a PDF, so it is
    # checked here; other readers' metadata arrives as it is)
    assert not usable("Інструкція для медичного застосування".encode().decode("latin-1"))
    assert shorten("слово " * 30, 20) == "слово слово слово…"
    assert shorten("Короткий заголовок") == "Короткий заголовок"


PARACETAMOL = "ПАРАЦЕТАМОЛ таблетки по 500 мг"
PARACETAMOL_SECTIONS = [
    ("Склад", "діюча речовина: парацетамол; 1 таблетка містить парацетамолу 500 мг."),
    ("Показання", "Больовий синдром слабкої або помірної інтенсивності, гарячка при застудних захворюваннях."),
]


@pytest.mark.parametrize("other", [
    "ІБУПРОФЕН таблетки, вкриті плівковою оболонкою, по 200 мг",  # shares "таблетки": still another medicine
    "Порядок зберігання архівних документів",
    "Annual report 2023",
])
def test_a_metadata_title_of_another_document_gives_way_to_the_first_heading(other):
    """A PDF made from another document's file keeps that one's metadata title: its words are not in this
    document's first pages, so the first heading is the title."""
    data = _with_metadata_title(pdfgen.ukrainian_pdf(PARACETAMOL, PARACETAMOL_SECTIONS), other)
    assert parse_pdf(data, "p.pdf").title == PARACETAMOL


@pytest.mark.parametrize("own", [
    "Таблетки парацетамолу при гарячці",  # inflected forms, and a word not in the text
    "ПАРАЦЕТАМОЛ",
])
def test_a_metadata_title_whose_words_the_document_holds_is_kept(own):
    data = _with_metadata_title(pdfgen.ukrainian_pdf(PARACETAMOL, PARACETAMOL_SECTIONS), own)
    assert parse_pdf(data, "p.pdf").title == own


def test_belongs_compares_inflected_words_and_believes_what_it_cannot_check():
    assert belongs("Правила зберігання архіву", ["# Порядок зберігання архівних документів\n\nПравил три."])
    assert not belongs("Ібупрофен капсули", ["# Парацетамол таблетки\n\nКапсули немає."])  # half is not more
    assert belongs("Звіт", []) and belongs("2024", ["текст"])  # no text (a scan), no word: nothing to judge by


# an official document's first page as the PDF parser writes it: the approval stamp, then the title
STAMPED = [
    "ЗАТВЕРДЖЕНО Заступник Міністра молоді та спорту України \n\nОлексій НІКІТЕНКО \n\n# **ПРАВИЛА** \n\n"
    "**спортивних змагань з джиу-джитсу** \n\n# 1. Загальні положення",
    "# ЗАТВЕРДЖУЮ \n\nЗаступник Міністра молоді та спорту України Олексій НІКІТЕНКО \n\n"
    "**ПРАВИЛА спортивних змагань з боротьби самбо** \n\n<!-- Start of picture text -->\n\n# Розділ І. ЗАГАЛЬНІ ПОЛОЖЕННЯ",
    "**ЗАТВЕРДЖУЮ Заступник Міністра молоді та спорту України** \n\n**__________________ Олексій НІКІТЕНКО** \n\n"
    "**_____  ____________ 2025 рік** \n\n# **ПРАВИЛА** \n\n# **спортивних змагань з веслування на байдарках і каное**",
    "ПОГОДЖЕНО\nПротокол засідання президії Федерації\nвід 12.03.2024 № 3\n\nПОЛОЖЕННЯ про чемпіонат України з "
    "плавання\n\n1. Мета",
    # as pipeline.documents.ingest writes the first page of ../shared/unlp-long's 173-page rulebook
    "ЗАТВЕРДЖЕНО\nЗаступник Міністра\nмолоді та спорту України\n\nОлексій НІКІТЕНКО\n\n**ПРАВИЛА**\n\n"
    "**спортивних змагань з джиу-джитсу**",
    "**ЗАТВЕРДЖУЮ**\n**Заступник Міністра молоді та спорту**\n**України**\n\n**__________________ Олексій "
    "НІКІТЕНКО**\n\n**_____ ____________ 2025 рік**\n\n**ПРАВИЛА**\n**спортивних змагань з веслування на байдарках і "
    "каное**\n\n**1. Загальні положення**",
]


@pytest.mark.parametrize("page,want", zip(STAMPED, [
    "ПРАВИЛА спортивних змагань з джиу-джитсу", "ПРАВИЛА спортивних змагань з боротьби самбо",
    "ПРАВИЛА спортивних змагань з веслування на байдарках і каное", "ПОЛОЖЕННЯ про чемпіонат України з плавання",
    "ПРАВИЛА спортивних змагань з джиу-джитсу", "ПРАВИЛА спортивних змагань з веслування на байдарках і каное"]))
def test_an_approval_stamp_is_not_the_title(page, want):
    """Issue 33 item 7: a rulebook was titled "ЗАТВЕРДЖЕНО Заступник Міністра молоді та спорту…"."""
    assert title_of(None, [page], "54a634188fe502d79e2653231c8ea286636142a0.pdf") == want


def test_a_page_without_a_stamp_keeps_its_heading_and_a_stamp_word_inside_a_sentence_is_text():
    assert title_of(None, ["# Інструкція для медичного застосування\n\nЗатверджено виробником."]) == \
        "Інструкція для медичного застосування"
    assert title_of(None, ["Порядок затверджено наказом\n\nТекст."]) == "Порядок затверджено наказом"
