"""Stage 6b — free-form answers: a short answer grounded in the passages, or an honest "not found".

A question without options is retrieved and reranked with the question alone
(``retrieval.query_text`` and the option-aware reranker both fall back to the
question when there are no options). The answer model then reads the top
passages once (system + passages + question, kept in its cache, as the option
scorer does) and, on top of that cached prefix:

* **generates** a short answer greedily (a phrase or one sentence), and
* **extracts** the best-supported span: clauses of the passages' sentences that
  share most words with the question, each scored by its mean log-probability
  as the answer (like the option scorer);
* judges whether the passages answer the question at all (p of "так" vs "ні");
* **verifies** each answer: "do the passages support this answer?" (p of "так").

``settings.free.free_mode`` says which answer is shown (chosen by measurement:
``bench/freeform.md``). The answer is shown only when it is grounded (most of
its content words occur in the passages), the model judges the passages to
hold an answer, and (``free_verify``) the verification supports it; otherwise
the result abstains and carries the closest passages. One retry with a wider
set (``free_retry_top_k`` passages, the new ones cut shorter) follows an
abstention; it keeps the first passages as read (``free_retry_extends``: the
model's cache holds them), so only the added passages are read.
``free_preceding`` adds each passage's preceding passage as context.

Everything the model computes for one (question, passages) pair is a
:class:`Reading` (plain data, cacheable) made by :class:`FreeReader` through the
answerer's free-text interface (``backends.base.Answerer``: llama.cpp, vLLM or a
remote server); :func:`decide` turns readings into an answer, so the switches
can be measured on one set of readings.
"""
from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .answer import page_with_words
from .flag import DENSE_BASIS
from ..prompts import SYSTEM, cut_to_tokens, fit_lines, passage_text, with_think_block
from ..text import fold_homoglyphs, normalize, term_keys, words
from ..types import Candidate, CandidateScores, Question, Search

NOT_FOUND = "Не знайдено у ваших документах"  # shown for an abstention ("not found in your documents")

_ASSISTANT = "<|im_end|>\n<|im_start|>assistant\nВідповідь:"
_WAY_OUT = " Якщо у фрагментах відповіді немає, напиши: Немає відповіді."


def _tails(request: str) -> tuple[str, str]:
    """A request for the answer as (the first ask, with the way out; the forced ask, without it)."""
    return request + _WAY_OUT + _ASSISTANT, request + _ASSISTANT


# the first ask; the forced one (FORCED_TAIL) only when the first answer was a refusal and the library may hold
# the answer, on the same cached prefix
GEN_TAIL, FORCED_TAIL = _tails("\n\nДай коротку відповідь на запитання (слово, фразу або одне речення) мовою "
                               "фрагментів, лише за тим, що в них сказано.")
# free_prompt="verbatim": the answer copied word for word from the passages, as short as it can be
VERBATIM_TAIL, VERBATIM_FORCED_TAIL = _tails("\n\nВипиши з фрагментів дослівно найкоротші слова, що відповідають "
                                             "на запитання (слово або фразу, не все речення).")
TAILS = {"short": (GEN_TAIL, FORCED_TAIL), "verbatim": (VERBATIM_TAIL, VERBATIM_FORCED_TAIL)}
ANSWERABLE_TAIL = ("\n\nЧи є у наведених фрагментах відповідь на це запитання? Відповідай лише «так» або «ні»."
                   + _ASSISTANT)


def verify_tail(answer: str) -> str:
    return (f"\nЗапропонована відповідь: {answer.strip()}\n\nЧи підтверджують фрагменти, що ця відповідь на "
            f"запитання правильна? Відповідай лише «так» або «ні»." + _ASSISTANT)


_REFUSAL = re.compile(r"немає відповіді|не (?:зазнач|вказ|міст|згаду|наведен|описан)|немає (?:інформації|даних)|"
                      r"інформації немає|невідомо|не можу відповісти", re.IGNORECASE)
_SENT = re.compile(r"(?<=[.!?;])\s+|\n+")
_CLAUSE = re.compile(r"\s*[,:;()—–]\s*|\s+-\s+")


_SENT_END = re.compile(r"[.!?…](?=\s|$)")
_CLAUSE_END = re.compile(r"\s*(?:[,;:)]|\s[—–-])(?=\s|$)")


def whole_ending(text: str) -> str:
    """A text cut off by the token limit, cut back to where it can end: its last sentence end, else its last
    clause end (when that keeps at least 40% of it), else its last whole word («…одразу після негай» never
    shows). A text of one word (or none) is kept."""
    text = text.rstrip()
    ends = [m.end() for m in _SENT_END.finditer(text)]
    if ends:
        return text[:ends[-1]]
    ends = [m.start() for m in _CLAUSE_END.finditer(text) if m.start() >= 0.4 * len(text)]
    if ends:
        return text[:ends[-1]].rstrip()
    head = text.rsplit(None, 1)[0]
    return head.rstrip(",;:—–- ") if head != text else text


def free_prompt(q: Question, passages: list[str]) -> str:
    """System + numbered passages + the question (the cached prefix every tail is read after)."""
    parts = ["Фрагменти документів:\n"]
    parts += [f"[Фрагмент {i}]\n{p}\n" for i, p in enumerate(passages, 1)]
    parts.append(f"Запитання: {q.text.strip()}")
    return f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n" + "\n".join(parts)


def is_refusal(text: str) -> bool:
    return not text.strip() or bool(_REFUSAL.search(text))


def clean_answer(text: str) -> str:
    text = text.strip().strip("«»\"“”").strip()
    return re.sub(r"\s+", " ", text)


def grounding(answer: str, passages: list[str]) -> float:
    """Share of the answer's content words that occur in the passages (1.0 if it has none and its text occurs
    verbatim); 0 when it holds a number that they do not. A word occurs when its first six characters do, or
    when any reading of it meets a reading of a passage's word (``text.term_keys``: «плоди» meets «плодів», «доза»
    meets «дози», which their first characters do not)."""
    ans = [w for w in words(fold_homoglyphs(answer))]
    toks = {w[:6] for w in ans}
    if not toks:
        return 1.0 if answer.strip() and answer.strip().lower() in "\n".join(passages).lower() else 0.0
    text = fold_homoglyphs("\n".join(passages))
    have = set(normalize(text, "prefix6"))
    if any(t.isdigit() and t not in have for t in toks):  # a number the passages do not hold is never grounded
        return 0.0
    missing = {w[:6]: w for w in ans if w[:6] not in have}
    if missing:
        readings = set().union(*(term_keys(w) for w in set(words(text))))
        missing = {t: w for t, w in missing.items() if not (term_keys(w) & readings)}
    return 1 - len(missing) / len(toks)


def candidate_spans(q: Question, passages: list[str], n_sentences: int = 3, max_spans: int = 14,
                    max_words: int = 25) -> list[str]:
    """Extractive candidates: the sentences sharing most words with the question, and their clauses."""
    terms = set(normalize(q.text, "prefix6"))
    sents = [s.strip() for p in passages for s in _SENT.split(p) if len(words(s)) >= 1]
    ranked = sorted(range(len(sents)), key=lambda i: (-len(terms & set(normalize(sents[i], "prefix6"))), i))
    out: list[str] = []
    for i in ranked[:n_sentences]:
        s = sents[i].rstrip(".;")
        pieces = [s] + [c for c in _CLAUSE.split(s) if c and c != s]
        for c in pieces:
            c = " ".join(c.split()[:max_words]).strip()
            if words(c) and c not in out:
                out.append(c)
    return out[:max_spans]


@dataclass
class Reading:
    """What the answer model said about one question over one set of passages."""
    generated: str  # greedy short answer (or a refusal: "Немає відповіді")
    extracted: str  # best-scoring candidate span ("" if none)
    p_answerable: float | None  # p("так") to "do the passages answer the question?" (None: not asked, ``judges``)
    p_supported: dict[str, float]  # answer text -> p("так") to "do the passages support this answer?"
    spans: dict[str, float] = field(default_factory=dict)  # candidate span -> mean log-probability
    forced: str = ""  # after a refusal: the short answer asked for without the way out (FORCED_TAIL)
    prompt_tokens: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class FreeReader:
    """Readings from any answer model through its free-text interface (``backends.base.Answerer``).

    Every prompt is the cached prefix (:func:`free_prompt`) followed by one tail, given to the model as two
    pieces; on llama.cpp the calls of one reading run back to back on its one cache (``exclusive``).
    """

    def __init__(self, answerer, max_tokens: int = 40, prompt: str = "short"):
        self.a, self.max_tokens = answerer, max_tokens
        self.gen_tail, self.forced_tail = TAILS[prompt]  # the answer's request (``free_prompt``)
        self._turn = with_think_block if answerer.settings.answer.think_block else (lambda tail: tail)

    def count_tokens(self, text: str) -> int:
        return self.a.count_tokens(text)

    def fit(self, q: Question, text: str, budget: int) -> str:
        return fit_lines(text, budget, set(normalize(q.text, "prefix6")), self.a.count_tokens)

    def prefix(self, q: Question, passages: list[str]) -> str:
        """:func:`free_prompt` within the context less room for a tail and the answer; when too long, its end
        is cut and the question re-added (the start holds the system prompt and the best passages)."""
        text = free_prompt(q, passages)
        budget = self.a.settings.answer.n_ctx - 160 - self.max_tokens
        if self.a.count_tokens(text) <= budget:
            return text
        tail = f"\nЗапитання: {q.text.strip()}"
        return cut_to_tokens(text, budget - self.a.count_tokens(tail), self.a.count_tokens) + tail

    def answer_text(self, prompt: list[str], on_text=None) -> str:
        """The short answer generated after ``prompt`` (``on_text`` told it as it is written): cleaned, and when
        the token limit cut it off, ended at its last sentence or clause end (:func:`whole_ending`)."""
        raw = self.a.generate_streamed(prompt, self.max_tokens, stop=["\n"], on_text=on_text)
        cut = self.a.count_tokens(raw) >= self.max_tokens - 2  # at the limit (tokens re-read from text may merge)
        return clean_answer(whole_ending(raw) if cut else raw)

    def read(self, q: Question, passages: list[str], extract: bool = True, on_text=None, judge: bool = True
             ) -> Reading:
        """Everything the model says about ``q`` over ``passages``; ``on_text`` is told the short answer (and a
        forced one) as it is written (``Answerer.generate_streamed``). Without ``judge`` the yes/no judgements
        (answerable, supported) are not asked (:func:`judges`: where they would not decide)."""
        t0 = time.perf_counter()
        a = self.a
        with a.exclusive():
            prefix = self.prefix(q, passages)
            gen = [prefix, self._turn(self.gen_tail)]
            spans: dict[str, float] = {}
            if extract:
                cands = candidate_spans(q, passages)
                lps = a.continuation_logprobs(gen, [" " + s for s in cands], max_tokens=48)
                spans = {s: float(np.mean(x)) for s, x in zip(cands, lps)}
            generated = self.answer_text(gen, on_text)
            forced = ""
            if is_refusal(generated):
                forced = self.answer_text([prefix, self._turn(self.forced_tail)], on_text)
            extracted = max(spans, key=spans.get) if spans else ""
            p_ans, supported = None, {}
            if judge:
                p_ans = a.yes_probability([prefix, self._turn(ANSWERABLE_TAIL)])
                for ans in dict.fromkeys(x for x in (generated, forced, extracted) if x and not is_refusal(x)):
                    supported[ans] = a.yes_probability([prefix, self._turn(verify_tail(ans))])
        return Reading(generated, extracted, p_ans, supported, spans, forced=forced,
                       prompt_tokens=a.count_tokens(prefix), seconds=time.perf_counter() - t0)


# ---- from readings to an answer ------------------------------------------------
@dataclass
class Switches:
    """The free-form settings that decide an answer from readings (``Settings.free_*``)."""
    mode: str = "generate"  # or "extract"
    verify: bool = True
    retry_top_k: int = 10  # 0: no retry
    min_answerable: float = 0.5
    min_supported: float = 0.5
    min_grounding: float = 0.5
    flag: bool = True  # the not-in-documents flag decides whether the library holds the answer
    judge_with_flag: bool = False  # the model's yes/no judgements abstain even when the flag holds
    judge_always: bool = False  # the judgements are asked (for the trace) even where they do not decide

    @classmethod
    def from_settings(cls, s) -> "Switches":
        f = s.free
        return cls(f.free_mode, f.free_verify, f.free_retry_top_k, f.free_min_answerable, f.free_min_supported,
                   f.free_min_grounding, f.free_flag, f.free_judge_with_flag, f.free_judge_always)


def judges(sw: Switches, present: bool) -> bool:
    """Whether the model's yes/no judgements decide: not where the flag says the library holds the document
    (unless ``judge_with_flag``)."""
    return not (sw.flag and present) or sw.judge_with_flag


def decide(r: Reading, passages: list[str], sw: Switches, present: bool = False, force: bool = True
           ) -> tuple[str, list[str], float]:
    """The answer text ("" = abstain), the reasons for abstaining, and its grounding.

    ``present``: the not-in-documents flag judged that the library holds the question's document; a refusal is
    then replaced (when ``force``) by the answer asked for without the way out (``Reading.forced``), which must be
    grounded like any other, and the model's yes/no judgements no longer abstain (unless ``judge_with_flag``): on
    the 1.5B CPU model they said "no" to ~40% of answerable questions while the flag caught ~90% of the
    unanswerable ones (``bench/freeform.md``).
    """
    text = r.generated if sw.mode == "generate" else r.extracted
    reasons = []
    if is_refusal(text) and force and sw.mode == "generate" and sw.flag and present and not is_refusal(r.forced):
        text = r.forced
    if is_refusal(text):
        reasons.append("the model found no answer")
        return "", reasons, 0.0
    g = grounding(text, passages)
    if g < sw.min_grounding:
        reasons.append(f"not grounded in the passages: the answer written, «{text[:80]}», has {g:.2f} of its "
                       f"words in them")
    judge = judges(sw, present)
    if judge and r.p_answerable is None:
        raise ValueError("the judgements decide here but the reading did not ask them")
    if judge and r.p_answerable < sw.min_answerable:
        reasons.append(f"the model judges the passages do not answer it (p={r.p_answerable:.2f})")
    if judge and sw.verify and r.p_supported.get(text, 0.0) < sw.min_supported:
        reasons.append(f"verification: not supported (p={r.p_supported.get(text, 0.0):.2f})")
    return ("" if reasons else text), reasons, g


@dataclass
class FreeAnswer:
    """A free-form answer for the app and the batch.

    ``text`` is the answer ("" when ``abstained``; the app then shows :data:`NOT_FOUND` and ``closest``).
    ``evidence_chunk`` is the passage the answer is grounded in; ``doc_name``/``page`` locate it (for an
    abstention: the top candidate's, as a pointer to the closest passage). ``grounding`` is the share of
    the answer's content words found in the passages (an answer is never shown below ``free_min_grounding``).
    """
    text: str
    abstained: bool
    reasons: list[str]
    doc_name: str | None
    doc_hash: str | None
    page: int | None
    evidence_chunk: Candidate | None
    evidence: list[Candidate]  # the passages the model read (with any preceding ones)
    closest: list[Candidate]  # when abstaining: the passages it looked at, best first
    candidates: list[Candidate]  # reranked
    grounding: float
    timings: dict[str, float]
    details: dict = field(default_factory=dict)

    @property
    def forced(self) -> bool:
        """Whether the answer was asked for after the model had found none (``decide``'s forced answer)."""
        return any(t.get("forced") for t in self.details.get("tries", []))


def answer_page(c: Candidate, q: Question, answer: str) -> int:
    """The page of a chunk where the answer's (else the question's) words are."""
    return page_with_words(c, answer or q.text)


def with_preceding(library, top: list[Candidate]) -> list[tuple[Candidate, Candidate | None]]:
    """Each passage with the passage before it in its document (None at a document's start or when already shown)."""
    ids = {c.chunk.chunk_id for c in top}
    out = []
    for c in top:
        prev = library.chunks([f"{c.chunk.doc_hash}:{c.chunk.index - 1}"]) if c.chunk.index > 0 else []
        p = prev[0] if prev and prev[0].chunk_id not in ids else None
        out.append((c, Candidate(p, CandidateScores(preceding_of=float(c.rank)), c.rank) if p else None))
    return out


def _before(prev: Candidate, cur: Candidate) -> str:
    """The preceding chunk's text up to where the current chunk starts (chunks overlap)."""
    body = prev.chunk.body
    i = body.find(cur.chunk.body[:60].strip()) if cur.chunk.body.strip() else -1
    return body[:i] if i > 0 else body


def passages_for(reader: FreeReader, q: Question, top: list[Candidate], library, preceding: bool,
                 passage_tokens: int, preceding_tokens: int) -> tuple[list[str], list[Candidate]]:
    """Passage texts for the prompt (each with its preceding context when asked) and the chunks they show."""
    texts, shown = [], []
    pairs = with_preceding(library, top) if preceding else [(c, None) for c in top]
    for c, prev in pairs:
        body = reader.fit(q, passage_text(c), passage_tokens)
        if prev is not None:
            lines = [ln for ln in _before(prev, c).split("\n") if ln.strip()]
            ctx = []
            while lines and reader.count_tokens("\n".join([lines[-1], *ctx])) <= preceding_tokens:
                ctx.insert(0, lines.pop())
            if ctx:
                body = "…\n" + "\n".join(ctx) + "\n" + body
                shown.append(prev)
        texts.append(body)
        shown.append(c)
    return texts, shown


def locate(answer: str, q: Question, shown: list[Candidate], top: Candidate) -> tuple[Candidate, int]:
    """The shown chunk that holds most of the answer's words (ties: the better ranked), and its page."""
    if answer:
        want = set(normalize(answer, "prefix6"))
        best = max(shown, key=lambda c: (len(want & set(normalize(c.chunk.body, "prefix6"))), -c.rank,
                                         c.scores.preceding_of is None))
        if want & set(normalize(best.chunk.body, "prefix6")):
            return best, answer_page(best, q, answer)
    return top, answer_page(top, q, "")


def _quoted(ws: list[str], most: int = 4) -> str:
    return ", ".join(f"«{w}»" for w in ws[:most]) + (" …" if len(ws) > most else "")


def not_found_reason(flag: dict) -> str:
    """Why a question was answered "not found" without reading, in words a visitor can read: the question's content
    words no document holds (``flag_features``' ``absent_words``), else those the closest passages lack
    (``unmatched_words``), else a weak match; then that the search alone decided it, and its score said with what
    it means (0 = surely in the documents, 1 = surely not; "not found" above the line fitted for this library's
    size), never a bare number."""
    f = flag.get("flag_features") or {}
    missing, unmatched = f.get("absent_words") or [], f.get("unmatched_words") or []
    if missing:
        why = f"its words {_quoted(missing)} occur in no document here"
    elif unmatched:
        why = f"the closest passages found do not hold its words {_quoted(unmatched)}"
    else:
        why = "the closest passages found match it only weakly, by words and by meaning"
    score, line = flag.get("not_in_documents_score"), flag.get("flag_threshold")
    how = ("the search alone decided this, so the answer model was not asked to read the passages" if score is None
           or line is None else
           f"the search alone decided this, so the answer model was not asked to read the passages (its check "
           f"scored {score:.2f} on a scale from 0, surely in your documents, to 1, surely not; above {line:.2f} "
           f"it says not found)")
    return f"the library seems not to hold it: {why}; {how}"


def answer_free(q: Question, found: Search, flag: dict, reader: FreeReader, library, settings, read=None,
                on_stage=None) -> FreeAnswer:
    """The free-form answer to ``q`` (its options are ignored) from what search ``found`` in ``library``.

    ``flag``: the not-in-documents flag (``flag.not_in_documents``, retrieval only; on the lexical features alone
    while documents are still embedding), asked before reading (``{}`` when ``free_flag`` is off): when it fires
    the answer is "not found" without reading; when it holds, a refusal of the model is replaced by its forced
    answer (:func:`decide`). ``read(q, passages, judge) -> Reading`` may replace the model call (a cache in the
    benchmark). ``on_stage(name, value)`` (the web app's) is told ``("draft", text so far)`` as the model writes
    an answer, and ``("retry", {"k": passages, "first": the first reading's answer})`` before the retry reads."""
    s = settings
    q = q.without_options()
    reranked, timings, still = list(found.reranked), dict(found.timings), list(found.lexical_only)
    if not reranked:
        raise ValueError("nothing was retrieved for this question: is the library empty?")
    draft = (lambda text: on_stage("draft", text)) if on_stage else None
    read = read or (lambda qq, ps, judge: reader.read(qq, ps, extract=s.free.free_mode == "extract", on_text=draft,
                                                      judge=judge))
    sw = Switches.from_settings(s)
    tries = [(s.answer.top_k_answer, s.free.free_passage_tokens)]
    if sw.retry_top_k and sw.retry_top_k > s.answer.top_k_answer:
        tries.append((sw.retry_top_k, s.free.free_retry_passage_tokens))
    details: dict = {"tries": [], "retrieved": list(found.retrieved), "lexical_only_docs": still, **flag}
    if flag.get("not_in_documents"):
        shown = reranked[:s.answer.top_k_answer]
        reasons = [not_found_reason(flag)]
        return FreeAnswer("", True, reasons, shown[0].chunk.doc_name, shown[0].chunk.doc_hash,
                          answer_page(shown[0], q, ""), None, shown, shown, reranked, 0.0, timings, details)
    # the flag holds = the library holds the document (a refusal is then replaced by the forced answer): on the
    # dense+lexical basis, or on the lexical one while documents are still embedding (asked at once after an upload,
    # as the indexed library's dense model would most likely hold); not on an embedder whose flag is lexical for good
    # (its lexical model catches a minority of absent documents: the model's own judgements decide there)
    # never where two of the question's content words (flag.is_content) occur in no form in any document (its fact
    # is not here: a refusal stands; the flag's rare_absent no longer says it, its rarest words being the language's)
    present = bool(flag) and (flag.get("flag_basis") == DENSE_BASIS or bool(still)) \
        and len(flag["flag_features"].get("absent_words") or []) < 2
    kept = None  # an earlier try's forced answer that held (grounded), used when no later try answers
    for n, (k, budget) in enumerate(tries):
        # the retry widens the set instead of deepening it: no preceding passages (they would double its length);
        # ``free_retry_extends``: the first try's passages are kept as they were read (the model's cache holds them)
        # and only the next ones are read, each cut to the retry's budget
        if n and s.free.free_retry_extends:
            seen = {c.chunk.chunk_id for c in shown}
            more, more_shown = passages_for(reader, q, [c for c in reranked[:k] if c.chunk.chunk_id not in seen],
                                            library, False, budget, s.free.free_preceding_tokens)
            texts, shown = texts + more, shown + more_shown
        else:
            more = None
            texts, shown = passages_for(reader, q, reranked[:k], library, s.free.free_preceding and n == 0, budget,
                                        s.free.free_preceding_tokens)
        if n and on_stage:
            on_stage("retry", {"k": k, "first": r.forced or r.generated,
                               **({"more": len(more)} if more is not None else {})})
        r = read(q, texts, judges(sw, present) or sw.judge_always)
        timings["answer" if n == 0 else "answer_retry"] = r.seconds
        last = n == len(tries) - 1
        text, reasons, g = decide(r, texts, sw, present, force=last or not s.free.free_forced_after_retry)
        details["tries"].append({"k": k, "reading": r.to_dict(), "reasons": reasons, "grounding": g,
                                 "forced": bool(text) and text == r.forced,
                                 "shown": [c.chunk.chunk_id for c in shown]})
        if text:
            break
        if kept is None and not last:
            # the reader wrote a forced answer after this try's refusal (the app showed it being written): when it
            # holds on these passages, it is the answer should the retry find none. Before issue 55 it was dropped,
            # and a retry's answer that did not hold (another wording, a name the passages do not use) ended the
            # question "not grounded" while the first passages held the answer written
            early, _, eg = decide(r, texts, sw, present, force=True)
            if early:
                kept = (n, early, eg, shown)
    if not text and kept:
        n, text, g, shown = kept
        details["tries"][n]["forced"] = True
        details["kept_from_try"] = n
        reasons = []
    chunk, page = locate(text, q, shown, reranked[0])
    return FreeAnswer(text, not text, reasons, chunk.chunk.doc_name, chunk.chunk.doc_hash, page,
                      chunk if text else None, shown, [] if text else shown, reranked, g, timings, details)


def free_reader(answerer, settings) -> FreeReader:
    """The reader over an answer model (any backend with the free-text interface)."""
    return FreeReader(answerer, settings.free.free_max_tokens, settings.free.free_prompt)
