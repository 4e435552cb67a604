"""The import rules of docs/architecture.md, read from the source (ast): who may import whom."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = {"ingest", "chunking", "index", "retrieval", "rerank", "answer", "qa", "render", "evaluation", "evaluate"}


def imports(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
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


def test_the_pipeline_never_imports_the_web_app():
    for f in modules("pipeline"):
        bad = {m for m in imports(f) if m.split(".")[0] in ("webapp", "app", "gradio")}
        assert not bad, f"{f.relative_to(ROOT)} imports {bad}"


def test_backends_never_call_the_stages():
    for f in modules("pipeline/backends"):
        bad = {m for m in imports(f) if m.startswith("pipeline.") and m.split(".")[1] in STAGES}
        assert not bad, f"{f.relative_to(ROOT)} imports {bad}"


def test_stages_see_models_only_through_the_interfaces():
    for name in ("ingest", "chunking", "index", "retrieval", "rerank", "answer", "render"):
        files = modules(f"pipeline/{name}") if (ROOT / "pipeline" / name).is_dir() else [ROOT / f"pipeline/{name}.py"]
        for f in files:
            bad = {m for m in imports(f) if m.startswith("pipeline.backends.") and m.split(".")[2] != "base"}
            assert not bad, f"{f.relative_to(ROOT)} imports {bad}"


def test_the_rules_see_imports():  # the checker itself: a relative import is resolved to its module
    got = imports(ROOT / "pipeline" / "rerank.py")
    assert "pipeline.backends.base" in got and "pipeline.retrieval" in got
