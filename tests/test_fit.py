"""``python -m fit``: the one command that writes the shipped weights, from the benchmarks' fitted-model files."""
import json
import subprocess
import sys

import fit


def test_fitted_models_go_into_the_weights_with_where_they_came_from(tmp_path, monkeypatch):
    monkeypatch.setattr(fit, "FITTED", tmp_path / "fitted")
    weights = tmp_path / "weights.json"
    weights.write_text(json.dumps({"temperature": 0.4, "flag": {"threshold": 0.1}}))
    f = fit.write_fitted("flag", {"flag": {"threshold": 0.2}, "flag_free": {"threshold": 0.3}},
                         "leaflets + rulebooks", "python -m bench.flag --write-weights")
    said = fit.apply([f], weights)
    w = json.loads(weights.read_text())
    assert w["temperature"] == 0.4  # what no file fitted is kept
    assert w["flag"] == {"threshold": 0.2} and w["flag_free"] == {"threshold": 0.3}
    assert w["provenance"]["flag"]["data"] == "leaflets + rulebooks"
    assert w["provenance"]["flag_free"]["command"] == "python -m bench.flag --write-weights"
    assert len(said) == 2 and all("fitted on leaflets + rulebooks" in s for s in said)


def test_the_command_without_files_says_how_to_use_it():
    r = subprocess.run([sys.executable, "-m", "fit"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "usage: python -m fit FILE" in r.stdout
