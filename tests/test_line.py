"""webapp/line.py: a question's place in line and the wait estimated from measured answers."""
import types

from webapp.line import Line, served


def test_place_and_wait_come_from_the_line_and_measured_answers():
    line = Line(slots=1)
    for t in (1.0, 2.0, 3.0):
        line.join(t)
    assert line.message(1.0) == "Waiting for the model… (no question ahead of yours)"  # nothing measured yet
    line.serve(1.0)
    assert line.ahead(3.0) == 2 and line.ahead(2.0) == 1
    line.leave(1.0, seconds=10.0)
    line.serve(2.0)
    assert line.ahead(3.0) == 1
    assert line.message(3.0) == ("Waiting for the model: 1 question ahead of yours; your answer in about 20 s "
                                 "(an answer takes 10 s here, the median of the last 1)")
    two = Line(slots=2)
    for t in (1.0, 2.0, 3.0):
        two.join(t)
    two.leave(0.0, seconds=6.0)
    assert "2 questions ahead" in two.message(3.0) and "about 12 s" in two.message(3.0)  # two answered at once


def test_a_ticket_never_served_is_dropped():
    line = Line(stale_s=0.0)
    line.join(1.0)
    line.join(2.0)  # joining sweeps the stale ones
    assert line.ahead(3.0) == 1


def test_served_handler_measures_and_leaves_even_when_it_fails():
    ctx = types.SimpleNamespace(line=Line())

    @served
    def handler(ctx, ui, sid, t_click, question):
        assert ctx.line.ahead(t_click + 1) == 1  # it is being served
        yield "a"
        if question == "fail":
            raise RuntimeError("boom")

    ctx.line.join(5.0)
    assert list(handler(ctx, None, "s", 5.0, "q")) == ["a"]
    assert ctx.line.ahead(9.0) == 0 and ctx.line.per_answer() is not None
    try:
        list(handler(ctx, None, "s", 6.0, "fail"))
    except RuntimeError:
        pass
    assert ctx.line.ahead(9.0) == 0 and len(ctx.line._seconds) == 1  # a failure is not a measured answer


def test_the_ask_tab_puts_a_question_in_line_and_takes_it_out():
    import inspect

    from webapp import ask_tab
    from webapp.common import bind

    class Key(str):
        """A component named by its attribute path (``ui.judge.box`` is "judge.box"): the handlers' outputs by name."""

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Key(f"{self}.{name}")

    class Names:
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Key(name)

    ctx, ui = types.SimpleNamespace(line=Line()), Names()  # every component the tab has, now and later
    ctx.line.join(0.5)  # someone else's question, waiting
    out = ask_tab.on_start(ctx, ui, "Питання?", *["x"] * 6)
    ticket = out["clicked"]
    assert out["status"] == "Waiting for the model… (1 question ahead of yours)" and ctx.line.ahead(ticket + 1) == 2
    call = bind(ask_tab.on_ask, ctx, ui)
    assert inspect.isgeneratorfunction(call) and list(inspect.signature(call).parameters)[:3] == ["sid", "t_click",
                                                                                                 "question"]
    said = list(call("not a session id", ticket, "Питання?", *["x"] * 6))  # answered (here: refused) and gone
    assert said and ctx.line.ahead(ticket + 1) == 1
