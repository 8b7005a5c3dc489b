"""Issue 29 item 8: live progress on a narrow terminal keeps what matters. At 80 columns an agent
run's line was `att… no verified kernel yet · 12735 tok` (no bar, no count, no elapsed time); now
the count, the elapsed time and the best result stay, and the less important fields go first,
whole. Rendered with rich Consoles of 80 and 60 columns, as a terminal of that width shows them."""

import io
import re
import types

import pytest
from rich.console import Console

from kernelwright.agent.memory import Attempt, Mode
from kernelwright.cli.agent_progress import AgentProgress
from kernelwright.cli.progress_line import Field, ProgressLine, fit
from kernelwright.cli.suite_cmds import SuiteProgress

ELAPSED = re.compile(r"\d:\d\d:\d\d")


def shown(renderable, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    text = console.file.getvalue()
    assert text.count("\n") == 1, text  # one line, never wrapped
    return text.rstrip("\n")


def agent_run(tasks: int = 3) -> AgentProgress:
    progress = AgentProgress(tasks=tasks, runs=1, iterations=4, quiet=True)
    for index in range(3):  # three answers, three failing attempts: 12735 tokens
        progress.event("call", {"task": "softmax", "run": 0,
                                "reply": types.SimpleNamespace(tokens=4245, cost_usd=0.01, role="generate")})
        progress.event("attempt", {"attempt": Attempt("softmax", 0, index, Mode.GENERATE if index == 0 else Mode.FIX,
                                                      0, None, None)})
    return progress


def test_an_agent_run_at_80_columns_keeps_bar_count_elapsed_and_state():
    line = shown(agent_run().line, 80)
    assert len(line) <= 80
    assert "3/12" in line and ELAPSED.search(line) and "no verified kernel yet" in line
    assert "━" * 10 in line and "tasks 0/3 (0 verified)" in line
    assert "…" not in line.split("·")[0]  # nothing cut in the middle of the important part


def test_an_agent_run_at_60_columns_drops_the_less_important_fields_whole():
    line = shown(agent_run().line, 60)
    assert len(line) <= 60
    assert "3/12" in line and ELAPSED.search(line) and "no verified kernel yet" in line
    assert "tok" not in line and "to go" not in line and "softmax run" not in line
    wide = shown(agent_run().line, 200)  # with room, everything is there, the latest event whole
    assert "12735 tok $0.030" in wide and "to go" in wide and "softmax run 0 attempt 2 (fix): " in wide


def test_a_verified_kernel_stays_in_view_on_a_narrow_line():
    progress = agent_run(tasks=1)
    progress.event("attempt", {"attempt": Attempt("softmax", 0, 3, Mode.OPTIMIZE, 0, None, None, kind="passed",
                                                  stage="passed", speedup=1.234)})
    line = shown(progress.line, 40)
    assert "4/4" in line and ELAPSED.search(line) and "best 1.23x" in line


@pytest.mark.parametrize("width", [80, 60])
def test_judge_suite_progress_keeps_count_elapsed_and_counts(width):
    progress = SuiteProgress("tritonbench-revised (cpu)", 184)
    for stage in ("passed", "passed", "call"):
        progress.on_record(types.SimpleNamespace(verdict={"stage": stage}, status="judged"))
    line = shown(ProgressLine(Console(file=io.StringIO()), progress.fields, enabled=False), width)
    assert len(line) <= width
    assert "3/184 tasks" in line and ELAPSED.search(line) and "passed: 2  failed: 1  not run: 0" in line
    if width == 80:
        assert "━" * 10 in line


def test_fit_keeps_fields_by_priority_in_display_order():
    fields = [Field("aaaa", 3), Field("bb", 1, " "), Field.bar(1, 2, 4), Field("long message here", 5, width=(5, 40))]
    assert fit(fields, 200).plain == "aaaa bb " + "━" * 40 + " · long message here"  # each field's own separator
    assert fit(fields, 7).plain == "aaaa bb"
    assert fit(fields, 6).plain == "bb"  # "aaaa" does not fit beside it: left out whole, not cut
    assert fit(fields, 27).plain == "aaaa bb " + "━" * 11 + " · long…"  # the bar grows first, by priority
