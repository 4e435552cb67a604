"""bench/removal.py runs and reports each size (the figures themselves are the benchmark's, not a test's)."""
import re

from bench import removal


def test_the_removal_benchmark_reports_each_size(capsys):
    removal.main(["--sizes", "80", "120"])
    out = capsys.readouterr().out
    assert out.startswith("# ") and "cores" in out.splitlines()[0]
    assert re.findall(r"^\s*(\d+) passages: removing a 50-passage document took \d+\.\d\d s$", out, re.M) == ["80", "120"]
