"""The web app's shape (issue 25): no function in webapp/ over 80 lines; handlers bound for Gradio keep what it reads."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import gradio as gr

from webapp.common import bind

WEBAPP = Path(__file__).resolve().parents[1] / "webapp"
MAX_LINES = 80


def test_no_function_in_webapp_is_over_80_lines():
    long = []
    for f in sorted(WEBAPP.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    long.append(f"{f.name}:{node.lineno} {node.name} ({n} lines)")
    assert not long, long


def _handler(ctx, ui, sid: str, evt: gr.SelectData):
    return {ui: (ctx, sid, evt)}


def _streaming(ctx, sid, *options):
    yield ctx, sid, options


def test_bind_keeps_the_name_signature_type_hints_and_streaming():
    from gradio.utils import get_type_hints

    h = bind(_handler, "ctx", "ui")
    assert h.__name__ == "_handler" and list(inspect.signature(h).parameters) == ["sid", "evt"]
    assert get_type_hints(h)["evt"] is gr.SelectData  # how Gradio knows to pass the selection
    assert h("s", "e") == {"ui": ("ctx", "s", "e")}
    g = bind(_streaming, "ctx")
    assert inspect.isgeneratorfunction(g) and list(g("s", "a", "b")) == [("ctx", "s", ("a", "b"))]


def test_no_handler_returns_an_empty_dict():
    """Gradio reads ``{}`` as one output's value (or a wrong number of outputs), not as "no change": a handler
    that changes nothing returns ``gr.skip()``. (A cancelled Remove returned ``{}`` and left an error overlay
    on the Remove button.)"""
    found = []
    for f in sorted(WEBAPP.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Return, ast.Yield)) and isinstance(node.value, ast.Dict) and not node.value.keys:
                found.append(f"{f.name}:{node.lineno}")
    assert not found, found
