"""Free-form answers: metrics and CSV reading (no model), and the real CPU models on a generated manual."""
import pytest

from pipeline.errors import QuestionsError
from pipeline.evaluation.free import free_metrics, is_free_form, read_free_questions, write_free_outputs
from pipeline.evaluation.scoring import exact_match, norm_answer, token_f1
from pipeline.answering.freeform import Reading, Switches, candidate_spans, decide, grounding, is_refusal
from pipeline.search.retrieval import query_text
from pipeline.settings import load_settings
from testkit.pdfgen import page_of
from pipeline.types import Question


def test_normalisation_unifies_apostrophes_case_and_punctuation():
    assert norm_answer("Внутрішньом’язово.") == norm_answer("внутрішньом'язово") == norm_answer("ВНУТРІШНЬОМʼЯЗОВО")
    assert norm_answer("«36 місяців», від дня продажу!") == "36 місяців від дня продажу"
    assert exact_match("Щотижня.", "щотижня") == 1.0 and exact_match("щодня", "щотижня") == 0.0
    assert exact_match("вiд 2 до 3 днiв", "від 2 до 3 днів") == 1.0  # Latin "i" inside Cyrillic words (PDF text)
    assert norm_answer("pH 7 i CO2") == "ph 7 i co2"  # Latin words stay Latin


def test_token_f1():
    assert token_f1("36 місяців", "36 місяців") == 1.0
    assert token_f1("строком 36 місяців від дня продажу", "36 місяців") == pytest.approx(2 * (2 / 6) * 1 / (2 / 6 + 1))
    assert token_f1("", "36 місяців") == 0.0 and token_f1("", "") == 1.0


def test_metrics_count_abstentions():
    rows = [{"pred": "36 місяців", "gold": "36 місяців", "pred_doc": "a.pdf", "gold_doc": "a.pdf", "pred_page": 4,
             "gold_page": 4},
            {"pred": "", "gold": "щотижня", "pred_doc": None, "gold_doc": "a.pdf", "pred_page": None, "gold_page": 3},
            {"pred": "", "gold": ""}, {"pred": "щодня", "gold": ""}]
    m = free_metrics(rows)
    assert m["f1"] == 0.5 and m["exact_match"] == 0.5 and m["abstained_answerable"] == 0.5
    assert m["abstention_recall"] == 0.5 and m["abstention_precision"] == 0.5
    assert m["doc_accuracy"] == 0.5 and m["page_accuracy"] == 0.5


def test_reads_free_form_csv():
    qs, notes = read_free_questions("Question_ID;Question;Answer;Doc_ID;Page_Num\n1;Скільки?;36 місяців;a.pdf;4\n"
                                    "2;Де?;;;\n;Без номера;x;;\n")
    assert [(q.qid, q.gold_answer, q.gold_doc, q.gold_page, q.options) for q in qs] == [
        ("1", "36 місяців", "a.pdf", 4, []), ("2", "", None, None, [])]
    assert len(notes) == 1 and "no Question_ID" in notes[0]
    qs, _ = read_free_questions("question_id,question\n7,Що?\n")
    assert qs[0].gold_answer is None  # no Answer column: nothing to score
    with pytest.raises(QuestionsError, match="Question_ID, Question"):
        read_free_questions("id,text\n1,x\n")
    # the same row rules as the six-option reader (pipeline.evaluation.questions.question_rows)
    from pipeline.evaluation.questions import MAX_CELL

    qs, notes = read_free_questions(f"Question_ID,Question\n1,{'я' * (MAX_CELL + 10)}\n1,Ще раз?\n")
    assert len(qs) == 1 and len(qs[0].text) == MAX_CELL
    assert "Question cut to" in notes[0] and "already used on line 2" in notes[1]

    # and the same end checks (pipeline.evaluation.questions.finish): row notes capped, too many questions refused
    from pipeline.evaluation.questions import MAX_PROBLEMS

    bad = "".join(f",{i}\n" for i in range(500))  # 500 rows without a Question_ID
    qs, notes = read_free_questions("Question_ID,Question\n1,Що?\n" + bad)
    assert len(qs) == 1 and len(notes) == MAX_PROBLEMS + 1 and notes[-1] == f"… and {500 - MAX_PROBLEMS} more"
    with pytest.raises(QuestionsError, match="has 3 questions, more than the 2 allowed in one run: split it"):
        read_free_questions("Question_ID,Question\n1,a?\n2,b?\n3,c?\n", max_questions=2)
    with pytest.raises(QuestionsError, match="has a header but no questions"):
        read_free_questions("Question_ID,Question\n")


def test_a_csv_without_option_columns_is_free_form():
    assert is_free_form("Question_ID;Question;Answer\n1;Скільки?;36\n")
    assert is_free_form("\ufeffquestion_id,question\n7,Що?\n".encode("utf-8"))
    assert not is_free_form("Question_ID,Question,A,B,C,D,E,F\n1,Що?,a,b,c,d,e,f\n")
    assert not is_free_form("Question_ID\tQuestion\ta\tb\n1\tЩо?\tx\ty\n")  # some options: not free-form


def test_free_prompt_is_cut_to_the_context_keeping_the_question():
    from pipeline.backends.vllm_engine import VllmAnswerer
    from pipeline.backends.vocab import qwen_vocab
    from pipeline.answering.freeform import FreeReader, free_prompt
    from pipeline.prompts import cut_to_tokens

    vocab = qwen_vocab()
    count = lambda t: len(vocab.encode(t))  # noqa: E731
    text = "Довгий текст без потрібної відповіді. " * 50
    cut = cut_to_tokens(text, 40, count)
    assert text.startswith(cut) and count(cut) <= 40 < count(text[: len(cut) + 1])
    ans = VllmAnswerer(load_settings("t4x2", n_ctx=1024), llm=object(), tokenizer=vocab)  # only counts tokens here
    reader = FreeReader(ans, max_tokens=40)
    q = Question("q", "Яким є строк гарантії на зволожувач?", [])
    short = reader.prefix(q, ["Гарантія — 36 місяців."])
    assert short == free_prompt(q, ["Гарантія — 36 місяців."])
    long = reader.prefix(q, ["Гарантія — 36 місяців.", text * 3])
    assert count(long) <= 1024 - 160 - 40 and long.endswith(f"\nЗапитання: {q.text}")
    assert long.startswith(free_prompt(q, ["Гарантія — 36 місяців.", text * 3]).split("Довгий")[0])  # cut at its end


def test_submission_has_empty_answer_for_abstentions(tmp_path):
    traces = [{"Question_ID": "1", "answer": "36 місяців", "doc": "a.pdf", "page": 4},
              {"Question_ID": "2", "answer": "", "abstained": True, "doc": "a.pdf", "page": 2}]
    write_free_outputs(tmp_path, traces, {"n": 2})
    assert (tmp_path / "submission.csv").read_text(encoding="utf-8").splitlines() == [
        "Question_ID,Answer,Doc_ID,Page_Num", "1,36 місяців,a.pdf,4", "2,,,"]


def test_query_without_options_is_the_question():
    s = load_settings()
    assert query_text(Question("q", "Яким є строк гарантії?", []), s, instruction=False) == "Яким є строк гарантії?"


def test_grounding_and_spans():
    ps = ["Виробник надає гарантію на зволожувач строком 36 місяців від дня продажу. Інше речення тут."]
    assert grounding("36 місяців", ps) == 1.0 and grounding("два роки", ps) == 0.0
    assert grounding("36 мiсяцiв", ps) == 1.0  # Latin look-alikes
    assert grounding("12 місяців", ps) == 0.0  # a number the passages do not hold
    spans = candidate_spans(Question("q", "Яким є строк гарантії на зволожувач?", []), ps)
    assert spans[0].startswith("Виробник надає гарантію") and len(spans) >= 1
    assert is_refusal("Немає відповіді.") and is_refusal("") and not is_refusal("36 місяців")


def test_grounding_meets_an_answer_written_in_another_inflection():
    """Issue 55 (q99): an answer in another case than the passage's («плоди» for «плодів», «доза» for «дози») is
    grounded; a name the passages never use is not, nor is a number they do not hold."""
    ps = ["Склад: 100 г крапель містить 0,240 г сухого екстракту плодів\nпрутняку звичайного (Fructis Agni casti). "
          "Дози: по 40 крапель."]
    assert grounding("плодів прутняку звичайного", ps) == 1.0
    assert grounding("плоди прутняку звичайного", ps) == grounding("прутняк звичайний", ps) == 1.0
    assert grounding("доза 40 крапель", ps) == 1.0
    assert grounding("Vitex agnus-castus", ps) == 0.0 and grounding("0,24 г", ps) == 0.0


def test_decide_abstains_for_each_signal():
    ps = ["Гарантія строком 36 місяців."]
    ok = Reading("36 місяців", "строком 36 місяців", 0.9, {"36 місяців": 0.9, "строком 36 місяців": 0.8})
    assert decide(ok, ps, Switches())[0] == "36 місяців"
    assert decide(Reading("Немає відповіді", "", 0.9, {}), ps, Switches())[0] == ""
    assert decide(Reading("12 місяців", "", 0.9, {"12 місяців": 0.9}), ps, Switches())[0] == ""  # not grounded
    assert decide(Reading("36 місяців", "", 0.2, {"36 місяців": 0.9}), ps, Switches())[0] == ""  # judged unanswerable
    unsupported = Reading("36 місяців", "", 0.9, {"36 місяців": 0.1})
    assert decide(unsupported, ps, Switches())[0] == ""
    assert decide(unsupported, ps, Switches(verify=False))[0] == "36 місяців"
    assert decide(ok, ps, Switches(mode="extract"))[0] == "строком 36 місяців"


def test_a_refusal_is_overruled_only_when_the_flag_says_the_library_holds_the_document():
    ps = ["Гарантія строком 36 місяців."]
    refused = Reading("Немає відповіді", "", 0.9, {"36 місяців": 0.9}, forced="36 місяців")
    assert decide(refused, ps, Switches())[0] == ""  # no verdict of the flag: the refusal stands
    assert decide(refused, ps, Switches(), present=True)[0] == "36 місяців"
    assert decide(refused, ps, Switches(flag=False), present=True)[0] == ""
    assert decide(refused, ps, Switches(), present=True, force=False)[0] == ""  # before the retry (if asked)
    assert decide(refused, ps, Switches(mode="extract"), present=True)[0] == ""  # extractive: no forced answer
    # the forced answer must be grounded like any other
    ungrounded = Reading("Немає відповіді", "", 0.9, {"12 місяців": 0.9}, forced="12 місяців")
    assert decide(ungrounded, ps, Switches(), present=True)[0] == ""
    # where the flag holds, the model's yes/no judgements no longer abstain (unless asked to)
    doubted = Reading("Немає відповіді", "", 0.2, {"36 місяців": 0.2}, forced="36 місяців")
    assert decide(doubted, ps, Switches(), present=True)[0] == "36 місяців"
    assert decide(doubted, ps, Switches(judge_with_flag=True), present=True)[0] == ""
    assert decide(doubted, ps, Switches(judge_with_flag=True, verify=False, min_answerable=0), present=True)[0] \
        == "36 місяців"
    assert decide(Reading("36 місяців", "", 0.2, {"36 місяців": 0.2}), ps, Switches())[0] == ""  # no flag: they do
    # the verification pass alone as a gate where the flag holds (bench.freeform's "verification abstains too")
    gate = Switches(judge_with_flag=True, min_answerable=0)
    assert decide(Reading("36 місяців", "", 0.1, {"36 місяців": 0.9}), ps, gate, present=True)[0] == "36 місяців"
    assert decide(Reading("36 місяців", "", 0.9, {"36 місяців": 0.3}), ps, gate, present=True)[0] == ""


# ---- with the real CPU models ----------------------------------------------------------------
@pytest.fixture(scope="module")
def pipe(manual_pipe):
    return manual_pipe


def test_answer_in_the_text_is_found(pipe, manual_pdf):
    """Issue 48: the answer is told as it is written (``on_stage("draft", …)``, each draft the one before and
    more), before the answer stage."""
    stages = []
    a = pipe.ask(Question("ask", "Яким є строк гарантії на зволожувач «Росинка-7»?", []),
                 on_stage=lambda name, value: stages.append((name, value)))
    names = [n for n, _ in stages]
    drafts = [v for n, v in stages if n == "draft"]
    assert names[0] == "search" and names[-1] == "answer" and len(drafts) >= 2, names
    assert all(b.startswith(x) for x, b in zip(drafts, drafts[1:])), drafts
    assert a.text and a.text in " ".join(drafts[-1].split()).strip("«»\"“” "), (a.text, drafts[-1])
    assert not a.abstained, a.reasons
    assert token_f1(a.text, "36 місяців") >= 0.5, a.text
    assert a.doc_name == "humidifier_manual.pdf" and a.page == page_of(manual_pdf, "строком 36 місяців")
    assert "36 місяців" in a.evidence_chunk.chunk.body and a.grounding >= 0.5
    assert {"retrieve", "rerank", "answer"} <= set(a.timings) and a.closest == []


def test_an_answer_cut_by_the_token_limit_ends_on_a_whole_word(pipe):
    """Issue 48: an answer the token limit cuts short is ended at a sentence or clause end, or a whole word: the
    same answer written with room to spare goes on at that point with a space or a punctuation mark."""
    from pipeline.answering.freeform import GEN_TAIL, FreeReader, free_prompt

    q = Question("ask", "Як доглядати за зволожувачем «Росинка-7»?", [])
    passages = [c.chunk.body for c in pipe.search(q).reranked[:1]]
    prompt = [free_prompt(q, passages), GEN_TAIL]
    longer = FreeReader(pipe.models.answerer, max_tokens=24).answer_text(prompt)
    for n in (6, 12):
        cut = FreeReader(pipe.models.answerer, max_tokens=n).answer_text(prompt)
        assert cut and longer.startswith(cut), (n, cut, longer)
        assert len(longer) == len(cut) or not longer[len(cut)].isalnum(), (n, cut, longer)


def test_the_judgements_are_asked_only_where_they_decide(pipe):
    """Issue 48: where the flag says the library holds the document, the model's yes/no judgements do not decide
    (``free_judge_with_flag`` off), so they are not asked: one model call fewer per answer, and per answer checked;
    the answer read is the same."""
    from pipeline.answering.freeform import FreeReader, Switches, judges

    assert judges(Switches(), present=False) and not judges(Switches(), present=True)
    assert judges(Switches(judge_with_flag=True), present=True) and judges(Switches(flag=False), present=True)

    class Counting:
        def __init__(self, a):
            self.a, self.asked = a, 0

        def __getattr__(self, name):
            return getattr(self.a, name)

        def yes_probability(self, prompt):
            self.asked += 1
            return self.a.yes_probability(prompt)

    q = Question("ask", "Яким є строк гарантії на зволожувач «Росинка-7»?", [])
    passages = [c.chunk.body for c in pipe.search(q).reranked[:2]]
    without, with_ = Counting(pipe.models.answerer), Counting(pipe.models.answerer)
    r = FreeReader(without).read(q, passages, extract=False, judge=False)
    r2 = FreeReader(with_).read(q, passages, extract=False, judge=True)
    assert without.asked == 0 and r.p_answerable is None and r.p_supported == {}
    assert with_.asked == 2 and 0.0 <= r2.p_answerable <= 1.0 and list(r2.p_supported) == [r2.generated]
    assert r.generated == r2.generated and "36" in r.generated
    # the app's answer to it: the flag holds, nothing asked; a reading without them cannot be judged by mistake
    a = pipe.ask(q)
    assert [t["reading"]["p_answerable"] for t in a.details["tries"]] == [None] and a.text
    with pytest.raises(ValueError, match="did not ask them"):
        decide(r, passages, Switches(), present=False)


def test_a_first_forced_answer_that_holds_is_kept_when_the_retry_finds_none(pipe):
    """Issue 55 (q99): the first try refused, so its forced answer was written (the app showed it) but, the
    forced answer waiting for the retry, dropped; the retry then wrote an answer its passages did not hold and the
    question ended "not grounded (0.00 of its words)". The first forced answer, grounded in the first passages,
    is now the answer when the retry gives none; a retry that answers still wins."""
    from pipeline.answering.freeform import answer_free, free_reader

    q = Question("ask", "Яким є строк гарантії на зволожувач «Росинка-7»?", [])
    found, s = pipe.search(q), load_settings()
    flag = {"not_in_documents": False, "flag_basis": "dense+lexical", "flag_features": {"absent_words": []}}

    def scripted(retry: str):
        said = iter([Reading("Немає відповіді.", "", 0.9, {"строком 36 місяців": 0.9}, forced="строком 36 місяців"),
                     Reading(retry, "", 0.9, {retry: 0.9})])
        return lambda qq, passages, judge: next(said)

    a = answer_free(q, found, flag, free_reader(pipe.models.answerer, s), pipe.library, s, scripted("Два роки"))
    assert a.text == "строком 36 місяців" and not a.abstained and a.forced, (a.reasons, a.details["tries"])
    assert a.details["kept_from_try"] == 0 and a.grounding == 1.0 and a.page and "36 місяців" in \
        a.evidence_chunk.chunk.body
    assert "«Два роки»" in a.details["tries"][1]["reasons"][0]  # the discarded answer is named
    b = answer_free(q, found, flag, free_reader(pipe.models.answerer, s), pipe.library, s, scripted("36 місяців"))
    assert b.text == "36 місяців" and not b.forced and "kept_from_try" not in b.details
    # no forced answer is kept where the flag does not say the library holds the document
    c = answer_free(q, found, {}, free_reader(pipe.models.answerer, s), pipe.library, s, scripted("Два роки"))
    assert c.abstained and "not grounded" in c.reasons[0]


def test_a_not_found_without_reading_says_why_in_words():
    """Issue 55: "not-in-documents score 0.74; the model was not asked" told a visitor nothing. The reason names
    the question's content words no document holds, else those the passages found lack, else a weak match; and a
    score only with what it means."""
    from pipeline.answering.freeform import not_found_reason

    flag = {"not_in_documents": True, "not_in_documents_score": 0.74, "flag_threshold": 0.31,
            "flag_features": {"absent_words": ["фервексу", "парацетамолу"], "unmatched_words": ["фервексу"]}}
    why = not_found_reason(flag)
    assert why.startswith("the library seems not to hold it: its words «фервексу», «парацетамолу» occur in no "
                          "document here;") and "scored 0.74 on a scale from 0, surely in your documents, to 1, " \
        "surely not; above 0.31 it says not found" in why, why
    flag["flag_features"]["absent_words"] = []
    assert "the closest passages found do not hold its words «фервексу»" in not_found_reason(flag)
    flag["flag_features"]["unmatched_words"] = []
    assert "match it only weakly" in not_found_reason(flag)
    assert "score" not in not_found_reason({"not_in_documents": True, "flag_features": {}})


def test_whole_ending():
    from pipeline.answering.freeform import whole_ending

    assert whole_ending("Приймати теплий розчин. Розчин приймають одразу після негай") == "Приймати теплий розчин."
    assert whole_ending("Розчин приймають одразу після їди, запиваючи водою, або негай") == \
        "Розчин приймають одразу після їди, запиваючи водою"
    assert whole_ending("Так, одразу після негай") == "Так, одразу після"  # a clause of one word is too short
    assert whole_ending("Парацетамол") == "Парацетамол" and whole_ending("2.5 мг на добу") == "2.5 мг на"


def test_absent_answer_is_not_found(pipe):
    """The document is there but not the fact (its words "ціна", "гривня" are in no document)."""
    a = pipe.ask(Question("ask", "Яка ціна зволожувача «Росинка-7» у гривнях?", []))
    assert a.abstained and a.text == "", a.details["tries"]
    assert a.reasons and a.closest and a.evidence_chunk is None
    # two of its three rarest words are nowhere: whether or not the flag fires (issue 26 moved its threshold to few
    # false fires), the model's refusal is not overruled by a forced answer
    assert sorted(a.details["flag_features"]["absent_words"]) == ["гривнях", "ціна"] and not a.forced, a.details


def test_a_question_about_a_document_that_is_not_there_is_not_found_without_reading(pipe):
    a = pipe.ask(Question("ask", "Скільки коштує вхідний квиток до художнього музею для студентів?", []))
    assert a.abstained and a.text == "" and a.details["not_in_documents"] is True, a.details
    assert a.details["tries"] == [] and "answer" not in a.timings  # the model was not asked
    # every content word of the question that no document holds is named, as the question writes it; its
    # ordinary wording never (issue 55: «вхідний», «художнього» are common adjectives)
    assert "the library seems not to hold it" in a.reasons[0] and a.closest
    assert all(f"«{w}»" in a.reasons[0] for w in ("квиток", "музею", "студентів")), a.reasons
    assert "вхідний" not in a.reasons[0] and "художнього" not in a.reasons[0], a.reasons
    # the score is never shown bare: what it means and the line it was read against are said (issue 55)
    score, line = a.details["not_in_documents_score"], a.details["flag_threshold"]
    assert f"scored {score:.2f} on a scale from 0, surely in your documents, to 1, surely not; above {line:.2f}" \
        in a.reasons[0] and "answer model was not asked" in a.reasons[0], a.reasons


def test_a_forced_answer_says_so_in_the_app():
    from pipeline.answering.freeform import FreeAnswer
    from webapp.views import free_answer_markdown

    def shown(tries):
        return free_answer_markdown(FreeAnswer("36 місяців", False, [], "a.pdf", "h", 4, None, [], [], [], 1.0, {},
                                               {"tries": tries}))
    assert "first said the passages hold no answer" in shown([{"forced": True}])
    assert "first said" not in shown([{"forced": False}]) and "**36 місяців**" in shown([])


def test_every_answer_prompt_setting_has_its_request_and_its_forced_request():
    """``free_prompt`` names one of ``TAILS``: the request with the way out ("Немає відповіді") and the forced
    one without it, both ending in the assistant's turn."""
    from typing import get_args

    from pipeline.answering.freeform import TAILS
    from pipeline.settings import FreeSettings

    assert set(get_args(FreeSettings.model_fields["free_prompt"].annotation)) == set(TAILS)
    for gen, forced in TAILS.values():
        assert "Немає відповіді" in gen and "Немає відповіді" not in forced
        assert gen.endswith("assistant\nВідповідь:") and forced.endswith("assistant\nВідповідь:")


def test_free_form_passages_are_cut_to_their_own_budget_not_the_six_option_one(pipe):
    """The first try reads passages cut to ``free_passage_tokens``; ``passage_tokens`` (six-option answers) is not
    read, so a shorter six-option prompt leaves free-form answers as they were."""
    from pipeline.answering.freeform import answer_free, free_reader

    q = Question("ask", "Яким є строк гарантії на зволожувач «Росинка-7»?", [])
    found, count = pipe.search(q), pipe.models.answerer.count_tokens

    def first_try(**over):
        s = load_settings(free_preceding=False, free_retry_top_k=0, **over)
        seen = []

        def read(qq, passages, judge):
            seen.append(passages)
            return Reading("36 місяців", "", 0.9, {"36 місяців": 0.9})
        answer_free(q, found, {}, free_reader(pipe.models.answerer, s), pipe.library, s, read)
        return seen[0]

    whole = first_try(passage_tokens=60, free_passage_tokens=0)
    assert whole == first_try(passage_tokens=420, free_passage_tokens=0)  # the six-option budget changes nothing
    cut = first_try(passage_tokens=0, free_passage_tokens=60)
    assert len(cut) == len(whole) == load_settings().answer.top_k_answer
    assert sum(map(count, cut)) < sum(map(count, whole)) - 60, (cut, whole)  # the free-form budget cuts


def test_the_retry_keeps_the_first_passages_and_reads_only_the_ones_it_adds(pipe):
    """Issue 48: after the first try finds no answer, the retry's prompt starts with the first try's passages as
    they were read (``free_retry_extends``), so the real model reads only the passages added (its cache holds the
    rest); switched off, the retry reads every passage afresh. The app is told how many are added."""
    from pipeline.answering.freeform import answer_free, free_prompt, free_reader

    q = Question("ask", "Як доглядати за резервуаром зволожувача «Росинка-7»?", [])
    found, a = pipe.search(q), pipe.models.answerer
    assert len(found.reranked) >= 3, "the manual gives too few passages for a retry"

    def run(extends: bool):
        s = load_settings(top_k_answer=1, free_retry_top_k=3, free_retry_extends=extends)
        reader, seen, stages, read_tokens = free_reader(a, s), [], [], []

        def read(qq, passages, judge):
            # each try's prompt read by the real model, as a reading starts (the tokens it reads counted), and a
            # refusal said: the first try's leads to the retry
            seen.append(passages)
            eval_ = a.llm.eval
            a.llm.eval = lambda toks: (read_tokens.append(len(toks)), eval_(toks))[1]
            try:
                a.prefill([reader.prefix(qq, passages)])
            finally:
                del a.llm.eval
            return Reading("Немає відповіді.", "", None, {})
        a.forget()
        ans = answer_free(q, found, {}, reader, pipe.library, s, read, on_stage=lambda n, v: stages.append((n, v)))
        return seen, dict(stages)["retry"], read_tokens[-1], a.count_tokens(reader.prefix(q, seen[1])), ans

    (first, retry), told, read, whole, ans = run(True)
    assert retry[:len(first)] == first and len(retry) > len(first), (first, retry)
    assert told == {"k": 3, "first": "Немає відповіді.", "more": len(retry) - len(first)}
    shown = [c.chunk.chunk_id for c in ans.evidence]
    assert len(shown) == len(set(shown)), shown  # a passage shown as another's preceding one is not added again
    # read: what the first prompt lacks (the passages added) and the question again
    first_prefix = a.count_tokens(free_prompt(q, first))
    assert read <= whole - first_prefix + a.count_tokens(f"\nЗапитання: {q.text}") + 4, (read, whole, first_prefix)
    (first0, retry0), told0, read0, whole0, _ = run(False)
    assert first0 == first and retry0[0] != first[0] and "more" not in told0
    # read afresh: all of it after the tokens it happens to share with the first prompt's start (the system
    # prompt, and the first passage's document prefix where the first try showed a preceding passage before it)
    prefix = free_reader(a, load_settings()).prefix
    t1, t2 = a._prompt([prefix(q, first)]), a._prompt([prefix(q, retry0)])
    shared = next((i for i, (x, y) in enumerate(zip(t1, t2)) if x != y), min(len(t1), len(t2)))
    assert read0 >= whole0 - shared - 2 and read < read0, (read0, whole0, shared, read)
