"""pipeline.text: words as the lexical index, the flag and the evidence lines read them."""
from pipeline.text import normalize, words


def test_words_are_free_of_markdown_marks():
    # pymupdf4llm writes italics "_…_" and bold "**…**": "_" was a word character, so every italic word was a
    # term of its own ("_дорос"), invisible to BM25 and to the flag
    assert words("_Дорослим:_ **Жінкам**") == ["дорослим", "жінкам"]
    assert words("__Дітям__ `доза` | 5 мг | ~~ні~~ > # Склад") == ["дітям", "доза", "5", "мг", "склад"]
    assert words("[інструкція](https://example.org/a_b?x=1) до_ _препарату") == ["інструкція", "препарату"]
    assert normalize("_Дорослим:_", "lemma") == normalize("Дорослим:", "lemma")


def test_a_word_hyphenated_across_a_line_break_is_one_word_and_a_list_dash_is_not_a_word():
    assert words("форма випус-\nку таблетки") == ["форма", "випуску", "таблетки"]
    assert words("форма випус\u00ad\nку") == ["форма", "випуску"]  # a soft hyphen
    assert words("таблетки\n- двічі на день") == ["таблетки", "двічі", "день"]
    assert words("будь-яка доза") == ["будь", "доза"]  # a hyphen inside a line keeps its two words


def test_apostrophes_of_every_kind_are_one_spelling():
    assert words("п'ять") == words("п’ять") == words("пʼять") == ["пять"]
