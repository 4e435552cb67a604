"""Issue 50: a visitor's files are served to that visitor only and go with what they belong to; every refusal of
Run is said beside it within a second.

"ann" and "ben" are fresh visitors of the shared test app (two browser contexts); a request with no cookie at
all (urllib) stands for anyone else who got hold of a link.
"""
from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from . import docs as D
from .harness import visitor_fixture
from .test_browser import (ANSWER_TIMEOUT, READY, expect, row_locator, status_rows, tab, upload,
                           wait_indexing_done)

ann = visitor_fixture("ann")
ben = visitor_fixture("ben")

HEADER = "Question_ID,Domain,N_Pages,Question,A,B,C,D,E,F,Correct_Answer,Doc_ID,Page_Num\n"
# each refused kind of questions file, and the words of its reason shown beside Run
REFUSED = {
    "columns.csv": (b"foo,bar,baz\n1,2,3\n", "lacks the column(s) Question_ID, Question (found: foo, bar, baz)"),
    "binary.csv": (bytes(range(256)) * 40, "the questions file is not text"),
    "rows.csv": ((HEADER + "".join(f"q{i},t,1,Q?,a,b,c,d,e,f,A,x.pdf,1\n" for i in range(5001))).encode(),
                 "more than the 5,000 allowed"),
    "field.csv": ((HEADER + "q1,t,1," + "я" * 600_000 + ",a,b,c,d,e,f,A,x.pdf,1\n").encode(),
                  "field larger than field limit"),
}


def status_without_cookies(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def on_disk(url: str) -> Path:
    return Path(unquote(url.split("file=", 1)[1]))


def uploads_of(page) -> list[str]:
    """The paths Gradio gave the page's uploads (recorded from its upload responses)."""
    got: list[str] = []

    def seen(response):
        if urlparse(response.url).path.endswith("/gradio_api/upload") and response.status == 200:
            got.extend(json.loads(response.text()))
    page.on("response", seen)
    return got


def refused_within_a_second(page, tmp_path, timings) -> None:
    """Each refused questions file, then Run with none: the reason beside Run within a second, Run usable again."""
    tab(page, "Evaluate")
    for name, (data, reason) in [*REFUSED.items(), ("none", (None, "Upload a questions CSV first"))]:
        if data is not None:
            (tmp_path / name).write_bytes(data)
            upload(page, "questions-csv", [tmp_path / name])
            expect(page.locator("#questions-csv")).to_contain_text(Path(name).stem, timeout=30_000)
        t0 = time.perf_counter()
        page.locator("#run").click()
        expect(page.locator("#eval-message")).to_contain_text(reason, timeout=1_000)
        timings.record(f"csv_refused_{name.split('.')[0]}_seconds", time.perf_counter() - t0)
        expect(page.locator("#eval-message")).to_contain_text("Not run")
        expect(page.locator("#run")).to_be_enabled()
        assert "Error" not in page.locator("#questions-csv").inner_text()  # no output marked as failed


@pytest.mark.timeout(1200)
def test_a_visitor_s_files_are_theirs_alone_and_go_with_what_they_belong_to(ann, ben, app, tmp_path, timings):
    uploaded = uploads_of(ann)
    pdf = tmp_path / "muzei.pdf"
    pdf.write_bytes(D.museum_pdf())
    upload(ann, "upload", [pdf])
    wait_indexing_done(ann, 1)
    assert status_rows(ann)[0][1] in READY
    refused_within_a_second(ann, tmp_path, timings)

    # ann asks: the evidence, enlarged and as the whole page
    tab(ann, "Ask")
    ann.locator("#block textarea").fill(D.block(D.MUSEUM_Q))
    ann.locator("#fill").click()
    ann.locator("#ask").click()
    expect(ann.locator("#answer")).to_contain_text("Answer:", timeout=ANSWER_TIMEOUT)
    expect(ann.locator("#ask-status")).not_to_contain_text("-0 s")
    urls = []
    for pane, elem_id in (("Evidence (enlarged)", "evidence-crop"), ("Whole page", "evidence-page")):
        tab(ann, pane)
        img = ann.locator(f"#{elem_id} img").first
        expect(img).to_be_visible(timeout=60_000)
        urls.append(urljoin(app.url, img.get_attribute("src")))

    # ... runs a CSV, opens a question's trace (two page images) and downloads both files
    tab(ann, "Evaluate")
    (tmp_path / "museum-questions.csv").write_bytes(D.questions_csv([("q1", D.MUSEUM_Q, "muzei.pdf", 1)]))
    upload(ann, "questions-csv", [tmp_path / "museum-questions.csv"])
    expect(ann.locator("#questions-csv")).to_contain_text("museum-questions", timeout=30_000)
    ann.locator("#run-name textarea").fill("mine")
    ann.wait_for_timeout(500)
    ann.locator("#run").click()
    expect(ann.locator("#eval-message")).to_contain_text("Run “mine” finished", timeout=2 * ANSWER_TIMEOUT)
    row_locator(ann, "question-table", "q1").locator("[role=gridcell]").first.click()
    for i in ("trace-predicted", "trace-gold"):
        img = ann.locator(f"#{i} img").first
        expect(img).to_be_visible(timeout=60_000)
        urls.append(urljoin(app.url, img.get_attribute("src")))
    for button in ("download-submission", "download-trace"):
        with ann.expect_download() as dl:
            ann.locator(f"#{button}").click()
        urls.append(dl.value.url)
    assert len(set(urls)) == 6 and all("/gradio_api/file=" in u for u in urls), urls
    files = [on_disk(u) for u in urls]
    assert all(f.is_file() and app.data_dir.resolve() in f.resolve().parents for f in files), files
    gradio_copies = [urljoin(app.url, f"/gradio_api/file={p}") for p in uploaded]
    assert len(gradio_copies) >= 1 + len(REFUSED) + 1, uploaded  # the PDF, the refused CSVs, q.csv

    # ann gets her files; ben and a request without cookies get none of them, nor any upload
    assert [ann.request.get(u).status for u in urls] == [200] * len(urls)
    for u in urls + gradio_copies:
        assert ben.request.get(u).status in (403, 404), u
        assert status_without_cookies(u) in (403, 404), u
        assert ann.request.get(u).status in (403, 404) or u in urls, u
    # an upload is deleted once read
    assert [p for p in uploaded if Path(p).exists()] == []

    # ann deletes the run and removes the document: her own links are gone too, and the files from disk
    ann.locator("#run-b input").click()
    ann.locator("#run-b").get_by_role("option", name="mine").click()
    ann.once("dialog", lambda d: d.accept())
    ann.locator("#delete-run").click()
    expect(ann.locator("#eval-message")).to_contain_text("Deleted run mine", timeout=30_000)
    tab(ann, "Library")
    ann.locator("#remove-pick input").click()
    ann.locator("#remove-pick").get_by_role("option", name=re.compile("muzei.pdf")).click()
    ann.once("dialog", lambda d: d.accept())
    ann.locator("#remove").click()
    expect(ann.locator("#library-message")).to_contain_text("Removed", timeout=30_000)
    assert all(ann.request.get(u).status in (403, 404) for u in urls)  # Gradio: 403 for a file not there
    assert [f for f in files if f.exists()] == []
