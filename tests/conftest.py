import os
from pathlib import Path

import pytest

os.environ.setdefault("PDFQA_MODEL_DIR", str(Path.home() / ".cache" / "pdfqa"))


@pytest.fixture(scope="session")
def embedder():
    from pipeline.backends.e5 import E5Embedder

    return E5Embedder()


@pytest.fixture(scope="session")
def counter(embedder):
    from pipeline.documents.chunking import TokenCounter

    return TokenCounter(embedder.count_word_tokens)


@pytest.fixture(scope="session")
def models(embedder):
    """The real embedder and answer model, loaded once for the session."""
    from pipeline.backends.registry import Models
    from pipeline.settings import load_settings

    m = Models(load_settings(), embedder=embedder)
    m.answerer  # load now
    return m


@pytest.fixture(scope="session")
def pdfgen():
    from testkit import pdfgen

    return pdfgen


# A generated manual with known answers: headings, a table, a running footer, four pages.
FILLER = ("Користувач повинен уважно ознайомитися з цим посібником перед початком роботи, "
          "зберігати його протягом усього строку служби приладу та передати новому власникові. ")


@pytest.fixture(scope="session")
def manual_pdf(pdfgen):
    sections = [
        ("1. Загальні відомості", FILLER * 12 + "\nЗволожувач «Росинка-7» призначений для житлових кімнат площею до 30 квадратних метрів."),
        ("2. Технічні характеристики", FILLER * 4),
        ("3. Догляд і чищення", FILLER * 14 + "\nРезервуар для води слід мити теплою водою з лимонною кислотою щотижня."),
        ("4. Гарантія", FILLER * 12 + "\nВиробник надає гарантію на зволожувач строком 36 місяців від дня продажу."),
    ]
    table = [["Параметр", "Значення"], ["Об'єм резервуара", "4,5 літра"], ["Потужність", "28 Вт"],
             ["Рівень шуму", "26 дБ"]]
    return pdfgen.ukrainian_pdf("Посібник користувача зволожувача повітря «Росинка-7»", sections,
                                footer="ТОВ «Росинка» · Посібник користувача", table=table, table_after=1)


@pytest.fixture(scope="session")
def other_pdf(pdfgen):
    sections = [("Розклад", "Бібліотека працює з вівторка по суботу з 10:00 до 19:00. " * 5),
                ("Правила", "Читач може взяти додому не більше п'яти книжок на строк до 21 дня. " * 5)]
    return pdfgen.ukrainian_pdf("Правила міської бібліотеки", sections, footer="Міська бібліотека")


@pytest.fixture(scope="module")
def manual_pipe(tmp_path_factory, models, manual_pdf, other_pdf):
    """A pipeline over the generated humidifier manual and the library rules (one per test module)."""
    from pipeline.qa import Pipeline
    from pipeline.settings import load_settings

    p = Pipeline(load_settings(), root=tmp_path_factory.mktemp("lib"), models=models)
    p.add_pdf(other_pdf, "library_rules.pdf")
    p.add_pdf(manual_pdf, "humidifier_manual.pdf")
    return p


@pytest.fixture(scope="session")
def vllm_stage(tmp_path_factory):
    """``vllm_stage(name)``: the results of vLLM's real CPU engine for one stage (answer, embed, rerank, args),
    from ``tests/vllm_driver.py`` under ``.venv-vllm``; each stage's engine built once per session."""
    from serving import require_vllm, run_vllm_driver

    out, cache = tmp_path_factory.mktemp("vllm"), {}
    # development only: PDFQA_TEST_VLLM_RESULTS=<folder> reuses an earlier session's <stage>.json (engines not rebuilt)
    reuse = os.environ.get("PDFQA_TEST_VLLM_RESULTS")

    def get(stage: str) -> dict:
        require_vllm()
        if stage not in cache and reuse and (Path(reuse) / f"{stage}.json").exists():
            import json

            cache[stage] = json.loads((Path(reuse) / f"{stage}.json").read_text())
        if stage not in cache:
            try:
                cache[stage] = run_vllm_driver(stage, out)
            except Exception as e:  # noqa: BLE001 - one failed engine build fails its tests, not rebuilt per test
                cache[stage] = e
        if isinstance(cache[stage], Exception):
            raise cache[stage]
        return cache[stage]

    return get
