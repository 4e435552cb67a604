"""Evaluation: questions files (``questions``), the metric and error kinds (``metric``), the run with its
trace (``run``), the batch command (``cli``, ``python -m pipeline.evaluate``) and the staged run (``staged``)."""
