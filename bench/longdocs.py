"""A long-document test set: Ukrainian rulebook-like PDFs of 100–170 pages with six-option questions.

Each document is a regulation of numbered articles ("Стаття N.") and sub-clauses ("N.M."), with
running headers (title · chapter) and footers, a table per chapter and template appendices. Most
articles are the same template filled with other names, numbers, deadlines and amounts, so many
pages read almost alike — the case where the page is hard to find. Each question is paraphrased
(the entity named in other words than the article's heading; some by the sub-clause number only;
some answered in a table) and its five distractors are the same field's values from other
articles. The gold page is read back from the rendered PDF's text layer, never assumed.

    python -m bench.longdocs --out runs/longdocs          # writes pdfs/*.pdf and questions.csv
    python -m pipeline.evaluate --pdfs runs/longdocs/pdfs --questions runs/longdocs/questions.csv \\
        --out runs/longdocs-eval --no-answer --data-dir runs/longdocs-lib

``bench.flag`` measures the not-in-documents flag on this set (its held-out kind, never fitted on); the study
that measured page choice on it is finished (docs/defaults.md). Deterministic: the same seed gives the same
bytes and questions.
"""
from __future__ import annotations

import argparse
import csv
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pymupdf

from testkit import pdfgen  # the test helpers' PDF generator (PyMuPDF only)

COLUMNS = ["Question_ID", "Question", "A", "B", "C", "D", "E", "F", "Correct_Answer", "Doc_ID", "Page_Num"]
LETTERS = "ABCDEF"

_SURNAMES = ["Коваленко", "Бондаренко", "Ткаченко", "Кравченко", "Олійник", "Шевчук", "Поліщук", "Лисенко",
             "Мельничук", "Савчук", "Гнатюк", "Дмитренко", "Литвиненко", "Руденко", "Мороз", "Левченко",
             "Марченко", "Гончаренко", "Кузьменко", "Павленко", "Остапчук", "Федорук", "Яковенко", "Зінченко"]
_MEN = [("Андрій", "Петрович"), ("Олег", "Миколайович"), ("Василь", "Іванович"), ("Тарас", "Богданович"),
        ("Юрій", "Степанович"), ("Ігор", "Олексійович"), ("Роман", "Васильович"), ("Дмитро", "Ярославович")]
_WOMEN = [("Олена", "Вікторівна"), ("Наталія", "Андріївна"), ("Ірина", "Петрівна"), ("Оксана", "Ігорівна"),
          ("Галина", "Степанівна"), ("Людмила", "Олегівна"), ("Тетяна", "Романівна"), ("Марія", "Юріївна")]
_CITIES = ["Луцьк", "Вінниця", "Ужгород", "Чернігів", "Полтава", "Житомир", "Тернопіль", "Рівне", "Суми",
           "Черкаси", "Хмельницький", "Івано-Франківськ", "Кропивницький", "Львів", "Одеса", "Київ"]
_MONTHS = ["січня", "лютого", "березня", "квітня", "травня", "червня", "липня", "серпня", "вересня",
           "жовтня", "листопада", "грудня"]


def _person(rng: random.Random) -> str:
    s = rng.choice(_SURNAMES)
    first, patr = rng.choice(_MEN + _WOMEN)
    return f"{s} {first} {patr}"


def _money(lo: int, hi: int, step: int) -> Callable[[random.Random], str]:
    return lambda rng: f"{rng.randrange(lo, hi + 1, step):,}".replace(",", " ") + " грн"


def _pick(*items: str) -> Callable[[random.Random], str]:
    return lambda rng: rng.choice(items)


def _num(lo: int, hi: int, unit: Callable[[int], str]) -> Callable[[random.Random], str]:
    return lambda rng: (lambda n: f"{n} {unit(n)}")(rng.randint(lo, hi))


def _plural(one: str, few: str, many: str) -> Callable[[int], str]:
    def f(n: int) -> str:
        if n % 10 == 1 and n % 100 != 11:
            return one
        if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
            return few
        return many
    return f


_DAYS = _plural("день", "дні", "днів")
_WORKDAYS = _plural("робочий день", "робочі дні", "робочих днів")
_MONTHS_N = _plural("місяць", "місяці", "місяців")
_HOURS = _plural("годину", "години", "годин")
_PEOPLE = _plural("спортсмена", "спортсменів", "спортсменів")


def _dates(rng: random.Random) -> str:
    d = rng.randint(1, 24)
    return f"з {d} по {d + rng.randint(2, 4)} {rng.choice(_MONTHS)}"


def _deadline_date(rng: random.Random) -> str:
    return f"{rng.randint(1, 28)} {rng.choice(_MONTHS)} 2027 року"


@dataclass
class Field:
    """One sub-clause of the article template: its value, its wordings, and how it is asked."""
    key: str
    value: Callable[[random.Random], str]
    clauses: list[str]  # "{v}" = the value
    questions: list[str]  # "{e}" = the entity in the question's words
    by_number: str  # the question when only the sub-clause number is given: "{n}" = "12.3", "{doc}" = "Регламенту"


@dataclass
class Entity:
    title: str  # as the article heading names it
    asked: list[str]  # as questions name it (paraphrases, genitive)
    short: str  # as a table row names it


@dataclass
class Theme:
    key: str
    title: str
    header: str
    footer: str
    doc_gen: str  # the document in the genitive: "Регламенту"
    article: str  # "{title}" → article heading text after "Стаття N."
    chapter: str  # "{k}" roman numeral, "{name}"
    entities: Callable[[random.Random], list[tuple[str, list[Entity]]]]  # chapters of entities
    fields: list[Field]
    boiler: list[str]  # sub-clauses every article has, not asked
    general: list[tuple[str, list[str]]]  # opening articles: title, paragraphs
    table_title: str
    table_cols: list[str]
    table_fields: list[Field]  # values only in the chapter's table
    form: list[str]  # appendix form columns
    article_table: Callable[[random.Random], list[list[str]]]  # a small table closing every article (not asked)
    table_intro: str  # the sub-clause that introduces it


# ---------------------------------------------------------------------------------------------
# Theme 1: sports competitions
_DISCIPLINES = ["легкої атлетики", "плавання", "веслування на байдарках і каное", "спортивної гімнастики",
                "настільного тенісу", "бадмінтону", "стрільби з лука", "велоспорту на шосе", "фехтування",
                "дзюдо", "академічного веслування", "триатлону", "боксу", "вільної боротьби", "шахів",
                "важкої атлетики"]
_GROUPS = [("серед юнаків та дівчат до 14 років", ["для юнаків і дівчат віком до 14 років",
                                                   "у молодшій юнацькій категорії (до 14 років)"], "до 14 р."),
           ("серед юніорів до 18 років", ["серед юніорів віком до 18 років", "у юніорській категорії (U18)"],
            "юніори U18"),
           ("серед молоді до 23 років", ["для молоді віком до 23 років", "у молодіжній категорії (U23)"],
            "молодь U23"),
           ("серед дорослих", ["у дорослій віковій категорії", "серед дорослих спортсменів"], "дорослі"),
           ("серед ветеранів (35 років і старші)", ["для ветеранів віком від 35 років",
                                                    "у ветеранській категорії"], "ветерани 35+")]
_ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "XIII", "XIV", "XV"]


def _z(word: str) -> str:
    """The preposition "з" with its word ("зі спортивної", "з плавання")."""
    return f"зі {word}" if re.match(r"[сшзж][бвгґджзклмнпрстфхцчшщ]", word) else f"з {word}"


def _sport_entities(rng: random.Random) -> list[tuple[str, list[Entity]]]:
    chapters = []
    for title, asked, short in _GROUPS:
        event = "Чемпіонат" if "дорослих" in title or "ветеранів" in title else "Першість"
        ev_gen = "чемпіонату" if event == "Чемпіонат" else "першості"
        ents = [Entity(f"{event} України {_z(d)} {title}",
                       [f"{ev_gen} України {_z(d)} {a}" for a in asked] + [f"національних змагань {_z(d)} {asked[0]}"],
                       f"{d[0].upper()}{d[1:]}") for d in _DISCIPLINES]
        chapters.append((f"Змагання {title}", ents))
    return chapters


SPORT = Theme(
    key="sport", title="Регламент всеукраїнських спортивних змагань Федерації студентського спорту України на 2027 рік",
    header="Регламент змагань ФССУ 2027", footer="Федерація студентського спорту України",
    doc_gen="Регламенту", article="{title}", chapter="Розділ {k}. {name}", entities=_sport_entities,
    fields=[
        Field("dates", _dates,
              ["Змагання проводяться {v} 2027 року; день приїзду — напередодні першого дня змагань.",
               "Терміни проведення: {v} 2027 року, включно з днем мандатної комісії."],
              ["На які дати заплановано проведення {e}?", "У які дні 2027 року відбуватимуться змагання {e}?"],
              "які терміни проведення змагань встановлено пунктом {n} {doc}?"),
        Field("city", _pick(*_CITIES),
              ["Місце проведення — місто {v}; конкретні спортивні споруди визначає місцевий оргкомітет.",
               "Змагання відбуваються у місті {v} на базі спортивних споруд, погоджених з Федерацією."],
              ["У якому місті проводитимуться змагання {e}?", "Яке місто прийматиме учасників {e}?"],
              "яке місто проведення змагань визначено пунктом {n} {doc}?"),
        Field("team", _num(4, 14, _PEOPLE),
              ["Від кожної області допускається команда у складі не більше {v} та двох тренерів.",
               "Склад команди області — до {v} і не більше двох тренерів або представників."],
              ["Скільки спортсменів щонайбільше може включити область до складу команди для {e}?",
               "Який максимальний кількісний склад команди області (без тренерів) дозволено для {e}?"],
              "яку найбільшу кількість спортсменів у команді області дозволяє пункт {n} {doc}?"),
        Field("fee", _money(150, 900, 50),
              ["Стартовий внесок становить {v} за кожного заявленого учасника і сплачується до початку мандатної комісії.",
               "За кожного учасника сплачується стартовий внесок у розмірі {v}; внесок не повертається."],
              ["Скільки коштує участь одного спортсмена (стартовий внесок) у {e}?",
               "Який розмір внеску за одного учасника передбачено для {e}?"],
              "якого розміру стартовий внесок встановлює пункт {n} {doc}?"),
        Field("entry", _num(5, 30, _DAYS),
              ["Попередні заявки надсилаються до Федерації не пізніше ніж за {v} до початку змагань.",
               "Попередня заявка подається на електронну пошту Федерації не пізніше ніж за {v} до першого дня змагань."],
              ["За який час до старту має надійти попередня заявка на участь у змаганнях {e}?",
               "Не пізніше ніж за скільки днів до початку потрібно подати попередню заявку для {e}?"],
              "у який строк до початку змагань слід надіслати попередню заявку згідно з пунктом {n} {doc}?"),
        Field("referee", _person,
              ["Головним суддею змагань призначено {v}, суддю національної категорії.",
               "Обов’язки головного судді змагань виконує {v}."],
              ["Хто виконуватиме обов’язки головного судді {e}?", "Кого призначено головним суддею {e}?"],
              "кого призначено головним суддею згідно з пунктом {n} {doc}?"),
        Field("costs", _pick("організації, що відряджають", "Федерація студентського спорту України",
                             "місцевий організаційний комітет", "заклади вищої освіти учасників",
                             "обласні відділення Федерації", "самі учасники"),
              ["Витрати на проїзд, проживання та харчування учасників несуть {v}.",
               "Фінансування витрат на відрядження (проїзд, проживання, харчування) здійснюють {v}."],
              ["Хто покриває витрати на проживання та харчування учасників {e}?",
               "За чий рахунок відряджаються учасники, що беруть участь у змаганнях {e}?"],
              "хто несе витрати на відрядження учасників відповідно до пункту {n} {doc}?"),
    ],
    boiler=["Змагання проводяться відповідно до чинних правил з виду спорту, затверджених відповідною "
            "міжнародною федерацією, та цього Регламенту.",
            "Учасники повинні мати при собі студентський квиток, паспорт або інший документ, що посвідчує особу, "
            "та медичний допуск лікарсько-фізкультурного диспансеру.",
            "Протести подаються головному судді у письмовій формі не пізніше ніж через 30 хвилин після "
            "оголошення результатів виду програми.",
            "Спортсмени, які не пройшли мандатну комісію у встановлений час, до змагань не допускаються; "
            "заміна учасників можлива лише до закінчення роботи мандатної комісії.",
            "Результати змагань затверджуються головною суддівською колегією та протягом трьох днів "
            "оприлюднюються на офіційному вебсайті Федерації."],
    general=[("Загальні положення", ["Цей Регламент визначає порядок організації та проведення всеукраїнських "
                                     "спортивних змагань серед студентів у 2027 році.",
                                     "Змагання проводяться з метою популяризації студентського спорту, "
                                     "виявлення найсильніших спортсменів та формування складу збірних команд."]),
             ("Керівництво проведенням змагань", ["Загальне керівництво здійснює Федерація студентського спорту "
                                                  "України. Безпосереднє проведення покладається на головну "
                                                  "суддівську колегію."]),
             ("Вимоги до учасників та умови їх допуску", ["До участі допускаються студенти закладів вищої та "
                                                          "фахової передвищої освіти, які мають належну "
                                                          "спортивну підготовку та медичний допуск."])],
    table_title="Таблиця {k}. Призовий фонд і нагородження змагань розділу {k}",
    table_cols=["Вид спорту", "Призовий фонд", "Комплектів медалей"],
    table_fields=[
        Field("prize", _money(20000, 240000, 5000), [],
              ["Який загальний призовий фонд передбачено для {e}?", "Яка сума призового фонду встановлена для {e}?"],
              ""),
        Field("medals", _num(2, 24, _plural("комплект", "комплекти", "комплектів")), [],
              ["Скільки комплектів медалей розігрується в рамках {e}?"], ""),
    ],
    form=["№", "Прізвище, ім’я", "Дата народження", "Заклад освіти", "Розряд", "Допуск лікаря"],
    article_table=lambda rng: [["День", "Час", "Захід"]] + [
        [f"День {i + 1}", f"{rng.randint(8, 12):02d}:{rng.choice(['00', '30'])}", what]
        for i, what in enumerate(["Приїзд команд, робота мандатної комісії, нарада представників",
                                  "Урочисте відкриття, попередні старти (кваліфікація)",
                                  rng.choice(["Півфінальні старти", "Особисті змагання", "Командні змагання"]),
                                  "Фінальні старти, нагородження переможців і призерів", "Від’їзд команд"])],
    table_intro="Програма змагань (орієнтовний розклад) наведена в таблиці; остаточний розклад затверджує "
                "суддівська колегія на нараді представників.",
)

# ---------------------------------------------------------------------------------------------
# Theme 2: grant programmes
_PROGRAMMES = ["«Молодь громади»", "«Цифрова школа»", "«Зелене місто»", "«Культурна спадщина»",
               "«Доступне середовище»", "«Безпечний простір»", "«Сільські ініціативи»", "«Наука для громад»",
               "«Ветеранський простір»", "«Медіаграмотність»", "«Енергоощадна громада»", "«Спорт для всіх»",
               "«Креативні індустрії»", "«Чиста вода»", "«Інклюзивна освіта»", "«Локальна історія»",
               "«Волонтерські центри»", "«Відкрите врядування»"]
def _programmes(variants, products, name: str, also: str, chapter: str):
    """Entities for a theme of programmes × variants: one chapter per variant (``{p}`` product, ``{v}`` variant,
    ``{a}`` the first way a question names the variant)."""
    def entities(rng: random.Random) -> list[tuple[str, list[Entity]]]:
        return [(chapter.format(v=v), [Entity(name.format(p=p, v=v), [f"програми {p} {a}" for a in asked]
                                              + [also.format(p=p, a=asked[0])], p) for p in products])
                for v, asked, _short in variants]
    return entities


_APPLICANTS = [("громадських організацій", ["для громадських об’єднань", "коли заявником є громадська організація"],
                "ГО"),
               ("органів місцевого самоврядування", ["для територіальних громад (ОМС)",
                                                     "коли заявник — орган місцевого самоврядування"], "ОМС"),
               ("закладів освіти", ["для шкіл, коледжів та університетів", "коли заявником є заклад освіти"],
                "заклади освіти"),
               ("благодійних фондів", ["для благодійних організацій", "коли заявник — благодійний фонд"],
                "благодійні фонди"),
               ("ініціативних груп молоді", ["для неформальних молодіжних груп",
                                             "коли заявку подає ініціативна група молоді"], "ініціативні групи"),
               ("бібліотек і музеїв", ["для закладів культури (бібліотек, музеїв)",
                                       "коли заявником є бібліотека або музей"], "бібліотеки й музеї")]


_grant_entities = _programmes(_APPLICANTS, _PROGRAMMES, "Грантова програма {p} для {v}", "конкурсу {p} {a}",
                              "Програми підтримки {v}")


GRANTS = Theme(
    key="grants", title="Положення про конкурсні програми Українського фонду громадських ініціатив",
    header="Положення про конкурсні програми УФГІ", footer="Український фонд громадських ініціатив",
    doc_gen="Положення", article="{title}", chapter="Розділ {k}. {name}", entities=_grant_entities,
    fields=[
        Field("amount", _money(50000, 900000, 10000),
              ["Максимальний розмір гранту в межах програми становить {v}.",
               "Сума гранту на один проєкт не може перевищувати {v}."],
              ["Яку найбільшу суму гранту можна отримати в межах {e}?",
               "Якою є гранична сума фінансування одного проєкту {e}?"],
              "який максимальний розмір гранту встановлено пунктом {n} {doc}?"),
        Field("cofin", _pick("5 %", "10 %", "15 %", "20 %", "25 %", "30 %", "35 %", "40 %"),
              ["Обов’язковий внесок заявника (співфінансування) — не менше {v} загального бюджету проєкту.",
               "Заявник забезпечує співфінансування у розмірі не менше {v} бюджету проєкту."],
              ["Яку мінімальну частку бюджету проєкту має покрити сам заявник у межах {e}?",
               "Який обов’язковий рівень співфінансування вимагають від учасників {e}?"],
              "яку частку співфінансування передбачає пункт {n} {doc}?"),
        Field("duration", _num(3, 18, _MONTHS_N),
              ["Тривалість реалізації проєкту — до {v} з дати підписання грантової угоди.",
               "Проєкт має бути реалізований протягом {v} від дня укладення грантової угоди."],
              ["Скільки часу щонайбільше може тривати проєкт, підтриманий у межах {e}?",
               "Яка максимальна тривалість реалізації проєкту {e}?"],
              "яку тривалість реалізації проєкту визначає пункт {n} {doc}?"),
        Field("deadline", _deadline_date,
              ["Конкурсні пропозиції приймаються до {v} включно через електронну систему Фонду.",
               "Кінцевий строк подання конкурсних пропозицій — {v}."],
              ["До якої дати можна подати заявку на участь у конкурсі {e}?",
               "Який кінцевий строк подання конкурсних пропозицій для {e}?"],
              "який кінцевий строк подання пропозицій встановлено пунктом {n} {doc}?"),
        Field("report", _num(10, 45, _DAYS),
              ["Фінансовий та змістовний звіти подаються протягом {v} після завершення проєкту.",
               "Грантоотримувач подає підсумковий звіт не пізніше ніж через {v} після завершення реалізації проєкту."],
              ["У який строк після завершення проєкту потрібно подати звітність у межах {e}?",
               "Скільки днів має грантоотримувач на підсумковий звіт після завершення проєкту {e}?"],
              "у який строк подається підсумковий звіт згідно з пунктом {n} {doc}?"),
        Field("manager", _person,
              ["Координатором програми є {v}, менеджерка (менеджер) відділу грантових програм.",
               "Консультації щодо програми надає координатор {v}."],
              ["Хто є координатором {e}?", "До кого звертатися по консультації щодо {e}?"],
              "хто є координатором програми відповідно до пункту {n} {doc}?"),
    ],
    boiler=["Грантові кошти спрямовуються виключно на цілі, визначені в погодженому бюджеті проєкту; "
            "перерозподіл між статтями бюджету понад 10 % погоджується з Фондом.",
            "Не підлягають фінансуванню витрати на придбання нерухомості, погашення боргів і діяльність, "
            "що має політичний або релігійний характер.",
            "Оцінювання конкурсних пропозицій здійснює експертна рада за критеріями, наведеними в розділі I.",
            "Один заявник може подати не більше однієї конкурсної пропозиції в межах цієї програми; "
            "пропозиції, подані з порушенням строків, не розглядаються.",
            "Перерахування коштів здійснюється траншами відповідно до графіка, визначеного грантовою угодою, "
            "після затвердження проміжного звіту."],
    general=[("Загальні положення", ["Це Положення визначає умови та порядок проведення конкурсів програм Фонду, "
                                     "вимоги до заявників, порядок оцінювання, фінансування і звітування."]),
             ("Терміни та визначення", ["Грантоотримувач — заявник, з яким укладено грантову угоду. "
                                        "Співфінансування — частка витрат проєкту, яку покриває заявник або партнери."]),
             ("Критерії оцінювання", ["Конкурсні пропозиції оцінюються за актуальністю, реалістичністю бюджету, "
                                      "спроможністю команди та сталістю результатів."])],
    table_title="Таблиця {k}. Граничні частки витрат за статтями бюджету (розділ {k})",
    table_cols=["Програма", "Адміністративні витрати", "Придбання обладнання"],
    table_fields=[
        Field("admin", _pick("5 %", "7 %", "8 %", "10 %", "12 %", "15 %", "18 %", "20 %"), [],
              ["Яку граничну частку бюджету можна спрямувати на адміністративні витрати в межах {e}?"], ""),
        Field("equip", _pick("15 %", "20 %", "25 %", "30 %", "35 %", "40 %", "45 %", "50 %"), [],
              ["Яка найбільша частка бюджету дозволена на придбання обладнання для {e}?"], ""),
    ],
    form=["№ з/п", "Стаття бюджету", "Одиниця", "Кількість", "Ціна, грн", "Сума, грн"],
    article_table=lambda rng: [["Етап конкурсу", "Строк"]] + [
        [what, f"протягом {rng.randint(5, 40)} днів"]
        for what in ["Технічна перевірка пропозицій", "Експертне оцінювання", "Засідання конкурсної комісії",
                     "Оприлюднення результатів", "Доопрацювання бюджету", "Підписання грантових угод"]],
    table_intro="Етапи проведення конкурсу та їх орієнтовна тривалість наведені в таблиці; строки рахуються "
                "від закінчення попереднього етапу.",
)

# ---------------------------------------------------------------------------------------------
# Theme 3: insurance programmes
_PLANS = ["«Базова»", "«Стандарт»", "«Оптимальна»", "«Комфорт»", "«Преміум»", "«Сімейна»", "«Студентська»",
          "«Корпоративна»", "«Амбулаторна»", "«Стаціонар»", "«Стоматологія»", "«Вагітність»", "«Подорож»",
          "«Активне життя»", "«Здоров’я 60+»", "«Реабілітація»", "«Дитяча»", "«Онко-захист»"]
_COVERS = [("на території України", ["при страхуванні по всій Україні", "з територією дії Україна"], "Україна"),
           ("у межах обласного центру", ["з покриттям лише в обласному центрі", "для обласного центру"],
            "обл. центр"),
           ("з розширеним покриттям (Україна та Європа)", ["з покриттям України та Європи",
                                                           "для розширеної території (Європа)"], "Україна + Європа"),
           ("для корпоративних клієнтів", ["для юридичних осіб (корпоративний договір)",
                                           "у корпоративному варіанті"], "корпоративний"),
           ("з сімейним покриттям", ["для сімейного договору", "у сімейному варіанті"], "сімейний"),
           ("для працівників бюджетних установ", ["для працівників державного сектору",
                                                  "у варіанті для бюджетних установ"], "бюджетний")]


_insurance_entities = _programmes(_COVERS, _PLANS, "Програма страхування {p} {v}", "страхового продукту {p} {a}",
                                  "Програми страхування {v}")


INSURANCE = Theme(
    key="insurance", title="Правила добровільного медичного страхування (безперервного страхування здоров’я) "
                           "ПрАТ «СК «Надійний захист»",
    header="Правила добровільного медичного страхування", footer="ПрАТ «СК «Надійний захист» · редакція 4",
    doc_gen="Правил", article="{title}", chapter="Розділ {k}. {name}", entities=_insurance_entities,
    fields=[
        Field("sum", _money(50000, 1500000, 25000),
              ["Страхова сума за програмою на одну застраховану особу становить {v}.",
               "Ліміт відповідальності Страховика на одну застраховану особу — {v} на рік."],
              ["Який ліміт відповідальності на одну особу передбачає {e}?",
               "Якою є страхова сума на одну застраховану особу для {e}?"],
              "яку страхову суму встановлено пунктом {n} {doc}?"),
        Field("franchise", _pick("0 %", "1 %", "2 %", "3 %", "5 %", "7 %", "10 %", "15 %"),
              ["Безумовна франшиза становить {v} від суми кожного збитку.",
               "За програмою застосовується безумовна франшиза у розмірі {v} від розміру збитку."],
              ["Яку безумовну франшизу застосовують у разі збитку за умовами {e}?",
               "Який розмір франшизи від кожного збитку встановлено для {e}?"],
              "яку франшизу передбачає пункт {n} {doc}?"),
        Field("notify", _num(12, 96, _HOURS),
              ["Застрахована особа повідомляє Страховика про настання страхового випадку протягом {v}.",
               "Про страховий випадок необхідно повідомити диспетчерську службу Страховика протягом {v} з моменту його настання."],
              ["Протягом якого часу потрібно повідомити страховика про страховий випадок за умовами {e}?",
               "Скільки часу має застрахована особа, щоб повідомити про страховий випадок за умовами {e}?"],
              "у який строк слід повідомити про страховий випадок згідно з пунктом {n} {doc}?"),
        Field("payout", _num(5, 30, _WORKDAYS),
              ["Страхова виплата здійснюється протягом {v} з дня отримання всіх необхідних документів.",
               "Страховик здійснює виплату не пізніше {v} після одержання повного пакета документів."],
              ["За який строк страховик має здійснити виплату після отримання документів за умовами {e}?",
               "Скільки часу відводиться на страхову виплату після подання документів за умовами {e}?"],
              "у який строк здійснюється страхова виплата відповідно до пункту {n} {doc}?"),
        Field("waiting", _num(0, 90, _DAYS),
              ["Період очікування (час від початку дії договору, протягом якого випадки не покриваються) — {v}.",
               "Страховий захист за програмою починає діяти після закінчення періоду очікування тривалістю {v}."],
              ["Який період очікування встановлено для {e}?",
               "Через скільки днів після укладення договору починає діяти захист {e}?"],
              "який період очікування визначає пункт {n} {doc}?"),
        Field("age", lambda rng: f"від {rng.choice([0, 1, 3, 16, 18, 21])} до {rng.choice([60, 65, 70, 75, 80])} років",
              ["На страхування за програмою приймаються особи віком {v}.",
               "Застрахованими особами за програмою можуть бути фізичні особи віком {v}."],
              ["Особи якого віку можуть бути застраховані в межах {e}?",
               "Які вікові межі встановлено для застрахованих осіб {e}?"],
              "які вікові межі застрахованих осіб встановлює пункт {n} {doc}?"),
    ],
    boiler=["Страховим випадком є звернення застрахованої особи протягом строку дії договору до медичного "
            "закладу з приводу гострого захворювання, загострення хронічного захворювання або травми.",
            "Не є страховими випадками звернення, пов’язані з косметичними процедурами, лікуванням безпліддя "
            "та захворюваннями, діагностованими до укладення договору, якщо інше не передбачено договором.",
            "Страховик має право відмовити у виплаті в разі неподання документів, передбачених розділом I цих Правил.",
            "Медична допомога надається в закладах охорони здоров’я, з якими Страховик має договори, "
            "за направленням лікаря диспетчерської служби.",
            "Зміна умов програми протягом строку дії договору оформлюється додатковою угодою сторін."],
    general=[("Загальні положення", ["Ці Правила розроблено відповідно до Закону України «Про страхування» та "
                                     "нормативно-правових актів, що регулюють медичне страхування."]),
             ("Суб’єкти страхування", ["Страхувальниками можуть бути дієздатні фізичні особи та юридичні особи, "
                                       "які уклали зі Страховиком договір страхування."]),
             ("Порядок укладення договору", ["Договір укладається на підставі письмової заяви страхувальника "
                                             "на строк від одного місяця до одного року."])],
    table_title="Таблиця {k}. Базові річні страхові тарифи (розділ {k})",
    table_cols=["Програма", "Тариф для осіб до 40 років", "Тариф для осіб від 40 років"],
    table_fields=[
        Field("tariff_young", _pick("1,8 %", "2,1 %", "2,4 %", "2,7 %", "3,0 %", "3,3 %", "3,6 %", "3,9 %"), [],
              ["Який базовий річний тариф для осіб до 40 років встановлено для {e}?"], ""),
        Field("tariff_old", _pick("4,2 %", "4,5 %", "4,8 %", "5,1 %", "5,4 %", "5,7 %", "6,0 %", "6,6 %"), [],
              ["Який річний тариф застосовується до застрахованих віком від 40 років для {e}?"], ""),
    ],
    form=["№", "ПІБ застрахованої особи", "Дата народження", "Програма", "Страхова сума", "Підпис"],
    article_table=lambda rng: [["Вид медичної допомоги", "Ліміт на рік, грн", "Покриття"]] + [
        [what, f"{rng.randrange(5000, 200000, 2500):,}".replace(",", " "), rng.choice(["100 %", "90 %", "80 %", "50 %"])]
        for what in ["Амбулаторно-поліклінічна допомога", "Стаціонарне лікування", "Лабораторна діагностика",
                     "Екстрена медична допомога", "Медикаментозне забезпечення", "Стоматологічна допомога"]],
    table_intro="Ліміти за видами медичної допомоги в межах страхової суми наведені в таблиці.",
)

THEMES = {t.key: t for t in (SPORT, GRANTS, INSURANCE)}
# (theme, pages, questions, seed): documents of different lengths
DEFAULT_SET = [("sport", 112, 28, 11), ("grants", 138, 28, 12), ("insurance", 166, 28, 13)]


@dataclass
class Fact:
    """Where a question's answer is written: a sub-clause sentence or a table row."""
    anchor: str  # text that is on the gold page (normalized), holding the value
    value: str
    field: Field
    entity: Entity
    ref: str  # "12.3" for a sub-clause, "" for a table row
    page: int = 0


@dataclass
class LongDoc:
    name: str
    pdf: bytes
    n_pages: int
    questions: list[dict] = field(default_factory=list)


def _blocks(theme: Theme, rng: random.Random, n_articles: int, n_forms: int) -> tuple[list, list[Fact]]:
    blocks: list[tuple] = [("chapter", theme.chapter.format(k="I", name="Загальні положення"))]
    facts: list[Fact] = []
    art = 0
    for title, paras in theme.general:
        art += 1
        blocks.append(("article", f"Стаття {art}. {title}"))
        blocks += [("para", f"{art}.{j}. {p}") for j, p in enumerate(paras, 1)]
    chapters = theme.entities(rng)
    per = max(1, n_articles // len(chapters))
    for ci, (cname, ents) in enumerate(chapters):
        k = _ROMAN[ci + 1]
        blocks.append(("chapter", theme.chapter.format(k=k, name=cname)))
        ents = ents[:per]
        values_by_entity = []
        for e in ents:
            art += 1
            blocks.append(("article", f"Стаття {art}. {theme.article.format(title=e.title)}"))
            items = [(f, None) for f in theme.fields] + [(None, b) for b in theme.boiler]
            j = 0
            for f, b in items:
                j += 1
                if f is None:
                    blocks.append(("para", f"{art}.{j}. {b}"))
                    continue
                v = f.value(rng)
                sentence = f"{art}.{j}. " + rng.choice(f.clauses).format(v=v)
                blocks.append(("para", sentence))
                facts.append(Fact(pdfgen.normalize(sentence), v, f, e, f"{art}.{j}"))
            blocks.append(("para", f"{art}.{j + 1}. {theme.table_intro}"))
            blocks.append(("table", theme.article_table(rng)))
            values_by_entity.append({f.key: f.value(rng) for f in theme.table_fields})
        rows = [theme.table_cols] + [[e.short] + [vals[f.key] for f in theme.table_fields]
                                     for e, vals in zip(ents, values_by_entity)]
        blocks.append(("para", theme.table_title.format(k=k)))
        blocks.append(("table", rows))
        for e, vals in zip(ents, values_by_entity):
            for f in theme.table_fields:
                facts.append(Fact(pdfgen.normalize(" ".join([e.short] + [vals[g.key] for g in theme.table_fields])),
                                  vals[f.key], f, e, ""))
    all_ents = [e for _, ents in chapters for e in ents[:per]]
    for i in range(n_forms):
        e = all_ents[i % len(all_ents)]
        blocks.append(("chapter", f"Додаток {i + 1}. Форма заявки: {e.title}"))
        blocks.append(("para", f"Заповнюється друкованими літерами та подається разом із супровідним листом. "
                               f"Форма {i + 1} застосовується до статті «{e.title}»."))
        blocks.append(("table", [theme.form] + [[str(r)] + [""] * (len(theme.form) - 1) for r in range(1, 26)]))
    return blocks, facts


def _render(theme: Theme, seed: int, n_articles: int, n_forms: int) -> tuple[bytes, list[Fact]]:
    blocks, facts = _blocks(theme, random.Random(seed), n_articles, n_forms)
    return pdfgen.rulebook_pdf(theme.title, blocks, header=theme.header, footer=theme.footer), facts


def page_texts(pdf: bytes) -> list[str]:
    with pymupdf.open("pdf", pdf) as doc:
        return [pdfgen.normalize(p.get_text()) for p in doc]


def _locate(facts: list[Fact], texts: list[str]) -> None:
    """Each fact's page: the one page whose text holds its whole anchor (0 if split by a page break)."""
    for f in facts:
        pages = [i + 1 for i, t in enumerate(texts) if f.anchor in t]
        f.page = pages[0] if len(pages) == 1 else 0


def build_doc(theme_key: str, pages: int, n_questions: int, seed: int) -> LongDoc:
    theme = THEMES[theme_key]
    n_ent = len(theme.entities(random.Random(0))) * len(theme.entities(random.Random(0))[0][1])
    n_articles = min(n_ent, pages)  # an article fills about a page
    pdf, facts = _render(theme, seed, n_articles, 0)
    n = pymupdf.open("pdf", pdf).page_count
    if n > pages:  # fewer articles per chapter
        n_articles = int(n_articles * (pages - 4) / n)
        pdf, facts = _render(theme, seed, n_articles, 0)
        n = pymupdf.open("pdf", pdf).page_count
    forms = 0
    while n < pages:  # appendix forms (about one page each) fill the rest
        forms += pages - n
        pdf, facts = _render(theme, seed, n_articles, forms)
        n = pymupdf.open("pdf", pdf).page_count
    _locate(facts, page_texts(pdf))
    name = f"longdoc-{theme.key}-{n}p.pdf"
    doc = LongDoc(name, pdf, n)
    doc.questions = _questions(theme, facts, n_questions, random.Random(seed * 7919))
    return doc


def _questions(theme: Theme, facts: list[Fact], n: int, rng: random.Random) -> list[dict]:
    usable = [f for f in facts if f.page]
    by_field: dict[str, list[str]] = {}
    for f in facts:
        by_field.setdefault(f.field.key, []).append(f.value)
    table = [f for f in usable if not f.ref]
    clause = [f for f in usable if f.ref]
    n_table = max(1, n // 5)
    picked = rng.sample(table, min(n_table, len(table))) + rng.sample(clause, min(n - n_table, len(clause)))
    rng.shuffle(picked)
    out = []
    for f in picked:
        if f.ref and rng.random() < 0.2:  # asked by the sub-clause number only
            text = f.field.by_number.format(n=f.ref, doc=theme.doc_gen)
            text = text[0].upper() + text[1:]
        else:
            text = rng.choice(f.field.questions).format(e=rng.choice(f.entity.asked))
        others = [v for v in dict.fromkeys(by_field[f.field.key]) if v != f.value]
        rng.shuffle(others)
        wrong = others[:5]
        while len(wrong) < 5:  # a field with few distinct values: fresh ones
            v = f.field.value(rng)
            if v != f.value and v not in wrong:
                wrong.append(v)
        options = wrong + [f.value]
        rng.shuffle(options)
        out.append({"Question": text, **dict(zip(LETTERS, options)),
                    "Correct_Answer": LETTERS[options.index(f.value)], "Page_Num": f.page,
                    "_anchor": f.anchor, "_value": f.value})
    return out


def build_set(spec=DEFAULT_SET) -> list[LongDoc]:
    docs = [build_doc(*s) for s in spec]
    qid = 0
    for d in docs:
        for q in d.questions:
            q["Question_ID"] = f"L{qid:03d}"
            q["Doc_ID"] = d.name
            qid += 1
    return docs


def write_set(docs: list[LongDoc], out: Path) -> Path:
    (out / "pdfs").mkdir(parents=True, exist_ok=True)
    for d in docs:
        (out / "pdfs" / d.name).write_bytes(d.pdf)
    csv_path = out / "questions.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for d in docs:
            w.writerows(d.questions)
    return csv_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.longdocs", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for pdfs/ and questions.csv (e.g. runs/longdocs)")
    a = ap.parse_args(argv)
    if not (a.out / "questions.csv").exists():
        docs = build_set()
        path = write_set(docs, a.out)
        for d in docs:
            print(f"{d.name}: {d.n_pages} pages, {len(d.questions)} questions")
        print(f"wrote {sum(len(d.questions) for d in docs)} questions to {path}")
    else:
        print(f"using the set already in {a.out} (delete it to generate again)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
