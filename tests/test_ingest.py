import pytest

from pipeline.ingest import IngestError, _clean_pages, parse_pdf


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
    ("corrupt_pdf", "damaged"), ("encrypted_pdf", "password-protected"),
    ("image_only_pdf", "no text layer"), ("not_a_pdf", "not a PDF"),
])
def test_bad_files_give_clear_errors(pdfgen, maker, message):
    with pytest.raises(IngestError, match=message):
        parse_pdf(getattr(pdfgen, maker)(), "bad.pdf")


def test_empty_file_and_page_limit(manual_pdf):
    with pytest.raises(IngestError, match="empty"):
        parse_pdf(b"", "e.pdf")
    with pytest.raises(IngestError, match="over the limit"):
        parse_pdf(manual_pdf, "m.pdf", max_pages=1)


def test_clean_pages_drops_running_lines_only():
    words = ["перший", "другий", "третій", "четвертий", "п'ятий"]
    pages = [f"Заголовок сайту\nЦе {w} розділ тексту\n- {i} -" for i, w in enumerate(words, 1)]
    out = _clean_pages(pages, 0.6)
    assert all("Заголовок сайту" not in p and "- " not in p for p in out)
    assert out == [f"Це {w} розділ тексту" for w in words]
