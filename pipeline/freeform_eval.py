"""Former entry point of the free-form batch: ``python -m pipeline.evaluate`` takes a free-form CSV itself.

Kept so old commands and imports still work; the code is ``pipeline.evaluation.free``.
"""
import sys

from .evaluation.cli import main
from .evaluation.free import (evaluate_free, exact_match, free_metrics, norm_answer, read_free_questions,  # noqa: F401
                              token_f1, write_free_outputs)

if __name__ == "__main__":
    sys.exit(main())
