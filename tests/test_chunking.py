from pipeline.documents.chunking import chunk_document, plain
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


def make_rulebook(n_pages=3):
    """Pages of numbered clauses of unequal length, no headings (as real rulebooks often come out of the parser)."""
    pages = []
    for p in range(1, n_pages + 1):
        clauses = [f"{p}.{k}. " + " ".join(f"Правило {p}-{k}-{i} щодо змагань і суддівства." for i in range(1 + k % 3))
                   for k in range(1, 9)]
        pages.append(make_page(p, "\n".join(clauses)))
    return Document("r" * 32, "rules.pdf", pages)


def test_a_long_documents_chunks_are_finer_and_start_at_its_clauses(counter):
    doc = make_rulebook()
    plain_chunks = chunk_document(doc, counter, chunk_tokens=120, overlap=30, prefix_tokens=0)
    long_chunks = chunk_document(doc, counter, chunk_tokens=120, overlap=30, prefix_tokens=0,
                                 long_pages=3, long_chunk_tokens=60)
    assert len(long_chunks) > len(plain_chunks)
    assert all(counter(c.body) <= 60 for c in long_chunks)
    starts = [c.body.lstrip("* ")[:6] for c in long_chunks]
    import re
    assert sum(bool(re.match(r"\d+\.\d+\. ", s)) for s in starts) >= 0.8 * len(long_chunks)  # whole clauses
    assert sum(bool(re.match(r"\d+\.\d+\. ", c.body[:6])) for c in plain_chunks) < len(plain_chunks)  # windows


def test_a_long_documents_prefix_can_be_shorter(counter):
    doc = make_rulebook()
    chunks = chunk_document(doc, counter, chunk_tokens=120, overlap=30, prefix_tokens=20, long_pages=3,
                            long_chunk_tokens=60, long_prefix_tokens=6)
    assert chunks[0].prefix and all(counter(c.prefix) <= 6 for c in chunks)


def test_a_short_document_is_chunked_as_before(counter):
    doc = make_rulebook(2)  # under long_pages
    a = chunk_document(doc, counter, chunk_tokens=120, overlap=30, prefix_tokens=20)
    b = chunk_document(doc, counter, chunk_tokens=120, overlap=30, prefix_tokens=20, long_pages=3, long_chunk_tokens=60,
                       long_prefix_tokens=6)
    assert [(c.body, c.prefix, c.heading, c.spans) for c in a] == [(c.body, c.prefix, c.heading, c.spans) for c in b]


def test_fingerprint_changes_with_the_long_document_chunking():
    from pipeline.settings import load_settings

    assert load_settings(long_chunk_tokens=0).fingerprint() == "e5-p128-c320-o64"  # as before when off
    assert load_settings(long_chunk_tokens=192).fingerprint() != load_settings(long_chunk_tokens=0).fingerprint()
    assert load_settings(long_chunk_tokens=192, long_doc_pages=20).fingerprint() != \
        load_settings(long_chunk_tokens=192).fingerprint()
    assert load_settings(long_chunk_tokens=192, long_prefix_tokens=64).fingerprint() != \
        load_settings(long_chunk_tokens=192, long_prefix_tokens=0).fingerprint()
