from pipeline.documents.chunking import TokenCounter, chunk_document, plain
from pipeline.documents.ingest import _headings
from pipeline.types import Document, Page


def make_page(n, md):
    return Page(n, 595, 842, md, [], [-1] * len(md), _headings(md))


def sentences(tag, k):
    return " ".join(f"Речення {tag}{i} про лікування та дозування препарату." for i in range(k))


def make_doc():
    p1 = f"# Інструкція для препарату Тестин\n\n## Склад\n\n{sentences('a', 12)}\n\n## Показання\n\n{sentences('b', 30)}"
    p2 = f"{sentences('c', 30)}\n\n## Протипоказання\n\n{sentences('d', 8)}"
    return Document("h" * 32, "test.pdf", [make_page(1, p1), make_page(2, p2)])


def test_token_counter_matches_the_embedder(embedder, counter):
    text = "Нафтизин чинить виражену судинозвужувальну дію на периферичні судини, 0,05 % розчин."
    direct = embedder._model.token_count("x " + text, False) - embedder._model.token_count("x", False)
    assert counter(text) == direct


def test_chunks_have_prefix_heading_budget_and_overlap(counter):
    doc = make_doc()
    chunks = chunk_document(doc, counter, chunk_tokens=120, overlap=30, prefix_tokens=20)
    assert len(chunks) > 4
    prefix = chunks[0].prefix
    assert prefix.startswith("Інструкція для препарату Тестин") and counter(prefix) <= 20
    assert all(c.prefix == prefix for c in chunks)  # every chunk carries the document prefix
    assert all(counter(c.body) <= 120 for c in chunks)
    assert all(c.embed_text().startswith(prefix) for c in chunks)
    # heading path at the chunk's start
    show = [c for c in chunks if "b0" in c.body]
    assert show[0].heading == "Інструкція для препарату Тестин > Показання"
    contra = [c for c in chunks if "d0" in c.body][0]
    assert contra.heading.endswith("Протипоказання") and contra.body.startswith("## Протипоказання")
    # consecutive chunks of one section overlap by up to `overlap` tokens, never more
    inside = [(a, b) for a, b in zip(chunks, chunks[1:]) if a.heading == b.heading]
    assert inside
    for a, b in inside:
        shared = set(a.body.split(".")) & set(b.body.split("."))
        assert shared, "no overlap between consecutive chunks"
        tail_tokens = counter(" ".join(s for s in b.body.split(".") if s in shared))
        assert tail_tokens <= 30 + 5


def test_page_mapping_and_spans(counter):
    doc = make_doc()
    chunks = chunk_document(doc, counter, chunk_tokens=120, overlap=30, prefix_tokens=20)
    pages = {p.number: p for p in doc.pages}
    for c in chunks:
        # the body is exactly the page text under its spans
        assert c.body == "\n".join(pages[p].markdown[s:e] for p, s, e in c.spans)
    across = [c for c in chunks if c.pages == [1, 2]]
    assert across, "a chunk should run across the page break"
    assert "b29" in across[0].body and "c0" in across[0].body
    assert chunks[-1].pages == [2] and "d7" in chunks[-1].body


def test_no_prefix_when_disabled(counter):
    chunks = chunk_document(make_doc(), counter, chunk_tokens=120, overlap=30, use_prefix=False)
    assert all(c.prefix == "" and c.embed_text() == (c.heading + "\n" + c.body) for c in chunks)


def test_plain_strips_markdown():
    assert plain("# **Склад** _діюча_ | речовина |") == "Склад діюча речовина"
