"""The names ``bench.flag`` and ``tests/test_bench_flag.py`` import from here, now in ``bench.fitting``.

The answer-quality study that lived here is finished (docs/defaults.md). Delete this module once those two files
import ``bench.fitting`` instead (issue 49's files; issue 46)."""
from bench.fitting import FLAG, FLAG_FREE, FOLDS, REPEATS, THRESHOLD, fit_logistic, grouped_folds, predict_logistic

__all__ = ["FLAG", "FLAG_FREE", "FOLDS", "REPEATS", "THRESHOLD", "fit_logistic", "grouped_folds", "predict_logistic"]
