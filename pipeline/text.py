"""Word normalisation for the lexical index (Ukrainian-aware, language-agnostic fallback)."""
from __future__ import annotations

import re
from functools import lru_cache

# A word: letters and digits, never "_" (pymupdf4llm writes italics as "_Дорослим:_": with "_" in a word every
# italic word was a term of its own, invisible to BM25 and to the flag). Markdown's other marks (**, `, |, #, >)
# are not word characters; a link's target is dropped ("[text](https://…)" counts as its text), a soft hyphen
# removed and a word hyphenated across a line break joined ("випус-\nку" → "випуску").
WORD = re.compile(r"[^\W_]+", re.UNICODE)  # also where Markdown words meet the PDF's (documents.ingest)
_APOS = re.compile(r"[’'ʼ`]")
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
_LINE_HYPHEN = re.compile(r"(?<=[^\W\d_])[-\u00ad]\s*\n\s*(?=[^\W\d_])")

# Function words that carry no evidence (Ukrainian; BM25's idf handles the rest).
STOP = set("""і й та а але або чи що як це цей ця ці той та ті в у на до з із зі за від по при про для без над під між
через не ні же би б то так також є був була було були бути може можна його її їх він вона воно вони ми ви я
яка який яке які котрий де коли тому щоб ще вже лише тільки дуже""".split())


@lru_cache(maxsize=1)
def _morph():
    import pymorphy3

    return pymorphy3.MorphAnalyzer(lang="uk")


@lru_cache(maxsize=200_000)
def _lemma(word: str) -> str:
    if word.isdigit() or len(word) < 3:
        return word
    return _morph().parse(word)[0].normal_form


def plain(text: str) -> str:
    """Text as its reader sees it, for word matching: link targets dropped, line-break hyphens and soft hyphens
    removed, apostrophes taken out of words ("п'ять" → "пять")."""
    text = _LINE_HYPHEN.sub("", _LINK_TARGET.sub("]", text)).replace("\u00ad", "")
    return _APOS.sub("", text)


def words(text: str) -> list[str]:
    """A text's words, lower-cased, without function words and free of Markdown marks:
    ``words("_Дорослим:_ **Жінкам**")`` → ``["дорослим", "жінкам"]``."""
    return [w for w in WORD.findall(plain(text.lower())) if w not in STOP]


TERM_CHARS = 6  # a content term is its lemma's first characters (see content_terms)


def term_key(word: str) -> str:
    """A word's content term: its Ukrainian lemma cut to ``TERM_CHARS`` characters. The lemmatiser guesses the
    lemma of a word it does not know (a medicine's or a sport's name) from its ending, differently for each case
    ("Фервекс" → фервекс, "Фервексу" → фервексу; "ретаболілу" → ретаболілий): cut to six characters they meet,
    as do a verb and its noun ("взаємодіяти", "взаємодія")."""
    return _lemma(word)[:TERM_CHARS]


@lru_cache(maxsize=200_000)
def term_keys(word: str) -> frozenset[str]:
    """Every content term a word may stand for: :func:`term_key` of each of the lemmatiser's readings. A word
    form is often read several ways with equal weight and the first reading is not always the common one
    ("годині" → годині (a plural-only noun) before година; "людині" → людин before людина), so a page's
    "години" (→ година) meets the question's "годині" only through its other readings."""
    if word.isdigit() or len(word) < 3:
        return frozenset({word})
    return frozenset(p.normal_form[:TERM_CHARS] for p in _morph().parse(word))  # the first is term_key(word)


def content_terms(text: str) -> set[str]:
    """Content terms (:func:`term_key`) of a text, without numbers and words under 3 characters: what the
    lexical index's document-frequency statistics count."""
    return {k for k in (term_key(w) for w in words(text)) if len(k) >= 3 and not k.isdigit()}


def normalize(text: str, mode: str = "lemma") -> list[str]:
    """Lexical tokens: ``lemma`` (pymorphy3 Ukrainian lemmas) or ``prefix6`` (words cut to 6 characters)."""
    ws = words(text)
    if mode == "prefix6":
        return [w[:6] for w in ws]
    if mode == "lemma":
        return [_lemma(w) for w in ws]
    return ws


_LATIN_LOOKALIKE = str.maketrans("aceiopxyACEIOPXYKMHTB", "асеіорхуАСЕІОРХУКМНТВ")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")


def fold_homoglyphs(text: str) -> str:
    """Latin look-alike letters inside Cyrillic words made Cyrillic (PDFs often mix them: "лiкування")."""
    return WORD.sub(lambda m: m[0].translate(_LATIN_LOOKALIKE) if _CYRILLIC.search(m[0]) else m[0], text)
