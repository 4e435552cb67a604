"""The generated one-word fact whose listed-scorer answer follows the options' order, and the loop over the
six cyclic orders that both its tests (tests/test_llama_cpp.py, tests/test_answer.py) run."""
from pipeline.answering.answer import option_orders
from pipeline.types import LETTERS, Question

CLEANING = Question("c", "Як часто слід мити резервуар для води зволожувача?",
                    ["щодня", "щомісяця", "щотижня", "раз на рік", "ніколи", "після кожного вмикання"])
CLEANING_TEXT = "Резервуар для води слід мити теплою водою з лимонною кислотою щотижня."


def picked(shown: Question, scores) -> str:
    """The text of the option ``scores`` gives the highest probability."""
    return shown.options[LETTERS.index(max(scores.probabilities, key=scores.probabilities.get))]


def in_every_order(q: Question, score):
    """(the question as shown, ``score(shown)``, the option text it picks) for each cyclic order of the options."""
    for order in option_orders(q, 6):
        shown = Question(q.qid, q.text, [q.options[i] for i in order])
        sc = score(shown)
        yield shown, sc, picked(shown, sc)
