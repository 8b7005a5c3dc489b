"""Issue 29 item 6, the messages of a new user's first run: a candidate that is a directory, a
binary kernel given to `optimize`, Ctrl-C with nothing verified, and a timeout's verdict (one
sentence, with the stack where the candidate hung in the text verdict of `eval` and
`judge-suite`)."""

import io
import json
import re
from pathlib import Path

import pytest

from kernelwright.cli import app

ROOT = Path(__file__).resolve().parents[2]
HANG = ROOT / "tests" / "candidates" / "hangs" / "host_loop_first_call.py"
OFFLINE = ["--model", "openai/gpt-4.1", "--offline", "--device", "cpu"]  # no key, no server


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_eval_of_a_directory_says_it_is_one(runner, tmp_path):
    folder = tmp_path / "cand.py"
    folder.mkdir()
    result = runner.invoke(app, ["eval", str(folder), "--task", "vector_add"])
    assert result.exit_code == 2
    assert squash(f"{folder} is a directory; expected a .py file") in squash(result.stderr)
    assert "does not exist" not in result.stderr
    result = runner.invoke(app, ["eval", str(tmp_path / "nope.py"), "--task", "vector_add"])
    assert result.exit_code == 2 and "does not exist" in flat(result.stderr)  # (rich wraps long paths)


@pytest.mark.parametrize("what", ["binary", "directory", "missing"])
def test_optimize_names_the_file_it_cannot_read(runner, tmp_path, what):
    """The raw "'utf-8' codec can't decode" is gone: optimize reads the kernel as the static stage
    does, and says which file and what is wrong with it; no run directory is made."""
    kernel = tmp_path / "kernel.py"
    if what == "binary":
        kernel.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(128, 256)))
    elif what == "directory":
        kernel.mkdir()
    result = runner.invoke(app, ["optimize", str(kernel), "--task", "vector_add", "--perf", *OFFLINE,
                                 "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    err = flat(result.stderr)
    assert "codec can't decode" not in err
    expected = {"binary": f"{kernel}: candidate file is not UTF-8 text (byte ",
                "directory": f"{kernel} is a directory; expected a .py file",
                "missing": f"candidate file '{kernel}' does not exist"}[what]
    assert squash(expected) in squash(err), err  # (rich wraps long paths where it likes)
    assert not (tmp_path / "run").exists()


def test_the_interrupt_message_says_when_nothing_was_verified(tmp_path):
    from rich.console import Console

    from kernelwright.cli.agent_results import interrupted_message as _interrupted_message

    def shown(verified: bool) -> str:
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(_interrupted_message("generate", tmp_path, verified))
        return console.export_text()

    assert "nothing was verified yet" in shown(False) and "best" not in shown(False)
    assert f"continue with kernelwright generate --resume {tmp_path}" in shown(False)
    assert f"the best kernels so far are in {tmp_path / 'best'}" in shown(True)


@pytest.mark.slow
def test_a_timeout_is_one_sentence_with_the_stack_where_it_hung(runner, tmp_path):
    """eval's and judge-suite's text verdicts: what it was running, once; the limit's number,
    once; and the candidate's own frame where it was stopped (README: "A case that runs out of
    time is reported with the stack where it hung")."""
    fast = ["--timeout-scale", "0.05", "--device", "cpu"]  # a 1.5 s running limit
    result = runner.invoke(app, ["eval", str(HANG), "--task", "vector_add", *fast])
    assert result.exit_code == 1, result.output
    out = flat(result.stdout)
    reason = re.search(r"verdict: call - (case .*?never terminates\?)", out).group(1)
    # (run_timeout's 1.5 s, or 50 x the reference's own time where that is longer: a loaded machine)
    assert re.fullmatch(r"case 1000 float32 \(seed \d+\): timed out after [\d.]+ s running, its running limit "
                        r"\((run_timeout|run_timeout_factor 50 x the reference's [\d.]+ s on this item), at most "
                        r"15 s; compiling is limited apart\): an infinite loop in host code, or a kernel that never "
                        r"terminates\?", reason), reason
    assert "where it hung (most recent call first" in out
    # (`while True: pass`: the dump names either line of the loop)
    assert re.search(rf'File "{re.escape(str(HANG))}", line 1[78] in vector_add', out), out

    folder = tmp_path / "cands"
    folder.mkdir()
    (folder / "vector_add.py").write_text(HANG.read_text())
    result = runner.invoke(app, ["judge-suite", "--suite", "builtin", "--candidates", str(folder), "--tasks",
                                 "vector_add", "--out", str(tmp_path / "r.jsonl"), *fast])
    assert result.exit_code == 0, result.output
    assert re.search(rf'timeout \(1\):\s+vector_add: case 1000 float32 .*\n\s+hung at File "{folder}/vector_add.py", '
                     r"line 1[78] in vector_add", result.stdout), result.stdout
    result = runner.invoke(app, ["judge-suite", "--suite", "builtin", "--candidates", str(folder), "--tasks",
                                 "vector_add", "--out", str(tmp_path / "r.jsonl"), "--json", *fast])
    (hung,) = json.loads(result.stdout)["failures"]["timeout"]
    assert re.fullmatch(rf'  File "{folder}/vector_add.py", line 1[78] in vector_add', *hung["hung_at"])


def test_hang_stack_keeps_the_candidates_frames_or_the_innermost_ones():
    from kernelwright.judge.common.verdict import hang_stack

    dump = "\n".join([
        "printed by the candidate",
        "Thread 0x00007f01 (most recent call first):",
        '  File "/usr/lib/python3/threading.py", line 320 in wait',
        "",
        "Current thread 0x00007f02 (most recent call first):",
        '  File "/x/triton/interpreter.py", line 99 in run',
        '  File "/c/cand.py", line 7 in kernel_body',
        '  File "/c/cand.py", line 30 in entry',
        '  File "/k/kernelwright/judge/sandbox/candidate.py", line 62 in _call_candidate',
    ])
    assert hang_stack(dump, "/c/cand.py") == ['  File "/c/cand.py", line 7 in kernel_body',
                                              '  File "/c/cand.py", line 30 in entry']
    innermost = ['  File "/usr/lib/python3/threading.py", line 320 in wait']
    assert hang_stack(dump, "/elsewhere.py", max_frames=1) == innermost
    assert hang_stack("no dump here", "/c/cand.py") == []


def test_the_outage_message_says_when_nothing_was_verified(tmp_path):
    """Exit 4 (the model stopped answering) says what Ctrl-C says: best/ is empty until a kernel
    is verified, so it is named only then (one helper for both)."""
    from types import SimpleNamespace

    from kernelwright.cli.agent_results import outage_message

    store, spec = SimpleNamespace(run_dir=tmp_path), SimpleNamespace(command="generate")
    none = outage_message(store, spec, "LLMTransientError: HTTP 500", verified=False)
    assert "nothing was verified yet" in none and "best" not in none
    assert f"finish the run with: kernelwright generate --resume {tmp_path}" in none
    some = outage_message(store, spec, "LLMTransientError: HTTP 500", verified=True)
    assert f"the best kernels so far are in {tmp_path / 'best'}" in some


def test_counts_in_messages_are_plural_by_the_count():
    from kernelwright.cli.usage import plural

    assert [plural(n, "attempt") for n in (0, 1, 2)] == ["0 attempts", "1 attempt", "2 attempts"]
    assert plural(1, "run") == "1 run" and plural(3, "task") == "3 tasks"
