"""``python -m pipeline.evaluate``: the batch command (``pipeline.evaluation.cli``), under its documented name."""
import sys

from .evaluation.cli import main

if __name__ == "__main__":
    sys.exit(main())
