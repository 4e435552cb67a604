"""bench.harness: who goes first turns, records pair by question, runs are kept, and the machine is named."""
import json

import pytest

from bench import harness


class FakeWorker:
    def __init__(self, label, log):
        self.label, self.log = label, log

    def ask(self, name, qid):
        self.log.append((name, qid, self.label))
        right = self.label == "new" or qid != "q2"
        return {"qid": qid, "letter": "A" if right else "B", "right": right, "seconds": 1.0, "score": 0.5 * right}


def test_every_worker_answers_every_question_and_who_goes_first_turns():
    log, seen = [], []
    workers = [FakeWorker("main", log), FakeWorker("new", log)]
    recs = harness.alternate(workers, {"unlp": ["q1", "q2"], "long": ["q3"]},
                             lambda name, i, n, qid, got, recs: seen.append((name, i, n, sorted(got))))
    assert [w for _, _, w in log] == ["main", "new", "new", "main", "main", "new"]
    assert [r["qid"] for r in recs["unlp"]["new"]] == ["q1", "q2"] and [r["qid"] for r in recs["long"]["main"]] == ["q3"]
    assert seen[-1] == ("long", 1, 1, ["main", "new"])
    m = harness.summarise(recs["unlp"]["new"], recs["unlp"]["main"])
    assert m["wrong_to_right"] == 1 and m["right_to_wrong"] == 0 and m["changed"] == 1 and m["mcnemar_p"] == 1.0
    assert m["answer_accuracy"] == 1.0 and m["p50_ratio"] == 1.0


def test_paired_refuses_records_of_other_questions():
    with pytest.raises(AssertionError):
        harness.paired([{"qid": "a", "right": True, "letter": "A"}], [{"qid": "b", "right": True, "letter": "A"}])


def test_sign_test_is_exact_and_symmetric():
    assert harness.sign_test(0, 0) == 1.0 and harness.sign_test(0, 5) == pytest.approx(2 / 32)
    assert harness.sign_test(2, 10) == harness.sign_test(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)


def test_a_run_replaces_its_own_entry_and_keeps_the_others(tmp_path):
    out = tmp_path / "runs.json"
    harness.record(out, {"date": "d1", "n": 1})
    harness.record(out, {"date": "d2", "n": 1})
    harness.record(out, {"date": "d1", "n": 2})
    assert json.loads(out.read_text())["runs"] == [{"date": "d2", "n": 1}, {"date": "d1", "n": 2}]


def test_the_machine_and_the_command_are_named():
    m = harness.machine()
    assert m["cores"] >= 1 and m["cpu"] and isinstance(m["flags"], list)
    assert all(f.startswith(("avx", "amx", "fma", "f16c", "sse4")) for f in m["flags"])
    line = harness.stamp("bench.speed", ["--pdfs", "x"])
    assert "UTC" in line and "cores" in line and "`python -m bench.speed --pdfs x`" in line


def test_questions_in_a_hash_order_and_documents_in_halves():
    class Q:
        def __init__(self, qid):
            self.qid = qid

    qs = [Q(str(i)) for i in range(20)]
    assert [q.qid for q in harness.ordered(qs)] == [q.qid for q in harness.ordered(qs[::-1])]
    a, b = harness.halves([f"doc{i}.pdf" for i in range(20)])
    assert a and b and not a & b and len(a | b) == 20
    assert harness.pick(list("abcdefg"), 3, None, 1) == ["b", "e"]
