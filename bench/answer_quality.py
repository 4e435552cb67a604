"""The names ``bench.flag`` imports from here, now in ``bench.harness``.

The answer-quality study that lived here is finished (docs/defaults.md). Delete this module once ``bench.flag``
imports ``bench.harness`` instead (issue 49's file; issue 46)."""
from bench.harness import halves, ordered

__all__ = ["halves", "ordered"]
