"""The import rules of docs/architecture.md, read from the source (ast): who may import whom."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the stage packages, lowest first: each may import the ones before it, never the ones after
LAYERS = ["documents", "index", "search", "answering", "qa", "evaluation"]
STAGES = {*LAYERS, "evaluate"}


def imports(path: Path, root: Path = ROOT) -> set[str]:
    """Absolute names of the modules ``path`` imports, function-local imports too (relative ones resolved)."""
    parts = path.relative_to(root).with_suffix("").parts
    package = ".".join(parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            mod = ".".join([*base, node.module] if node.module else base)
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def module_name(path: Path, root: Path = ROOT) -> str:
    name = ".".join(path.relative_to(root).with_suffix("").parts)
    return name.removesuffix(".__init__")


def test_the_pipeline_never_imports_the_web_app():
    for f in modules("pipeline"):
        bad = {m for m in imports(f) if m.split(".")[0] in ("webapp", "app", "gradio")}
        assert not bad, f"{f.relative_to(ROOT)} imports {bad}"


def test_backends_never_call_the_stages():
    for f in modules("pipeline/backends"):
        bad = {m for m in imports(f) if m.startswith("pipeline.") and m.split(".")[1] in STAGES}
        assert not bad, f"{f.relative_to(ROOT)} imports {bad}"


def test_stages_see_models_only_through_the_interfaces():
    for name in ("documents", "index", "search", "answering"):
        for f in modules(f"pipeline/{name}"):
            bad = {m for m in imports(f) if m.startswith("pipeline.backends.") and m.split(".")[2] != "base"}
            assert not bad, f"{f.relative_to(ROOT)} imports {bad}"


def test_each_stage_imports_only_the_stages_before_it():
    for i, layer in enumerate(LAYERS):
        later = set(LAYERS[i + 1:])
        files = modules(f"pipeline/{layer}") if (ROOT / "pipeline" / layer).is_dir() else [ROOT / f"pipeline/{layer}.py"]
        for f in files:
            bad = {m for m in imports(f) if m.startswith("pipeline.") and m.split(".")[1] in later}
            assert not bad, f"{f.relative_to(ROOT)} ({layer}) imports a later stage: {bad}"


TREES = ["pipeline", "webapp", "bench", "fit", "testkit", "app.py"]  # the code the product and its benchmarks are


def import_cycles(*folders: Path, root: Path = ROOT) -> list[list[str]]:
    """Groups of modules under ``folders`` (packages, or single files) that import each other, directly or round
    a loop, across the folders too (Tarjan's strongly connected components)."""
    files = [f for d in folders for f in ([d] if d.suffix == ".py" else sorted(d.rglob("*.py")))]
    mods = {module_name(f, root): f for f in files}
    graph = {m: {i for i in imports(f, root) if i in mods and i != m} for m, f in mods.items()}
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_anywhere_in_the_tree():
    assert import_cycles(*(ROOT / t for t in TREES)) == []


def test_the_pipeline_never_imports_the_benchmarks_or_the_tests():
    for f in modules("pipeline"):
        bad = {m for m in imports(f) if m.split(".")[0] in ("bench", "fit", "tests", "testkit")}
        assert not bad, f"{f.relative_to(ROOT)} imports {bad}"


def test_the_rules_see_imports_and_cycles(tmp_path):  # the checker itself
    got = imports(ROOT / "pipeline" / "search" / "rerank.py")
    assert "pipeline.backends.base" in got and "pipeline.search.retrieval" in got
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("def f():\n    from .b import g\n")  # a function-local import counts
    (tmp_path / "pkg" / "b.py").write_text("from .a import f\n")
    (tmp_path / "pkg" / "c.py").write_text("from . import a\n")
    assert import_cycles(tmp_path / "pkg", root=tmp_path) == [["pkg.a", "pkg.b"]]
    # a loop through two packages and a single-file module is found only when all of them are looked at
    (tmp_path / "pkg" / "b.py").write_text("")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "__init__.py").write_text("from pkg.c import x\n")
    (tmp_path / "pkg" / "c.py").write_text("import top\n")
    (tmp_path / "top.py").write_text("def f():\n    import other\n")
    assert import_cycles(tmp_path / "pkg", root=tmp_path) == []
    assert import_cycles(tmp_path / "pkg", tmp_path / "other", tmp_path / "top.py", root=tmp_path) == [
        ["other", "pkg.c", "top"]]


def _calls(path: Path) -> list[tuple[str, str, int]]:
    """(object source, method name, line) of every ``obj.method(...)`` call in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(ast.unparse(n.func.value), n.func.attr, n.lineno) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]


def test_one_way_to_run_a_question():
    """Issue 32: ``Pipeline.ask`` is how every caller runs a question; no code outside pipeline/qa.py calls a
    pipeline's stages (``retrieve``/``answer``) itself, and the answering layer never drives the pipeline."""
    files = [p for d in ("pipeline", "webapp", "bench", "fit", "tests") for p in modules(d)] + [ROOT / "app.py"]
    found = [f"{p.relative_to(ROOT)}:{line} {obj}.{name}(" for p in files if p.name != "qa.py"
             for obj, name, line in _calls(p) if name in ("retrieve", "answer", "ask_free")]
    assert found == [], found
    for p in modules("pipeline/answering"):
        assert not any(obj in ("pipe", "pipeline", "self.pipe") for obj, _, _ in _calls(p)), p


def test_the_benchmarks_never_write_the_shipped_weights():
    """Fitting apart from benchmarking: only ``python -m fit`` writes under pipeline/ (the benchmarks write their
    fitted models under bench/results/fitted/)."""
    for p in modules("bench"):
        text = p.read_text(encoding="utf-8")
        assert "weights.json" not in text.replace("pipeline/answering/weights.json)", ""), p
        assert '/ "pipeline"' not in text, p
