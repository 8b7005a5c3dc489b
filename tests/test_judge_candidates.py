"""The real cascade under the Triton interpreter: good candidates pass, and broken, cheating and
crashing ones fail at the right stage with the right reason, leaving no process behind."""

import os
import re
import time

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.judge.common.procs import children_of
from kernelwright.tasks import resolve_task

from .conftest import candidate_expectations

CASES = candidate_expectations("vector_add", gpu=False)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    os.environ["KERNELWRIGHT_FRAME_GRACE_S"] = "3"  # half_a_reply.py: its timeout, not 30 s
    task = resolve_task("vector_add")
    options = JudgeOptions(seeds=2, seed=1234, load_timeout=60, call_timeout=8, case_timeout=8)
    with JudgePool("cpu", workers=2, options=options) as pool:
        results = pool.judge_many([(task, path) for path, _, _ in CASES])
        worker_pids = [w.process.pid for w in pool._workers if w is not None]
        # while the workers are alive: nothing but their own reference/spare children remains
        leftovers = {pid: children_of(pid) for pid in worker_pids}
    found = {path.name: v for (path, _, _), v in zip(CASES, results)}
    daemon = re.search(r"escaped daemon (kw-escaped-dmn)", found["escaped_grandchild.py"].log_tail)
    return found, daemon.group(1) if daemon else None, leftovers, worker_pids


def _named(comm: str) -> list[int]:
    """The running processes (zombies aside) whose name is `comm`."""
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/comm") as f:
                if f.read().strip() == comm and not _is_zombie(int(entry)):
                    out.append(int(entry))
        except (OSError, ValueError):
            continue
    return out


@pytest.mark.slow
@pytest.mark.parametrize("path,stage,reason", CASES, ids=[p.stem for p, _, _ in CASES])
def test_candidate_verdict(verdicts, path, stage, reason):
    verdict = verdicts[0][path.name]
    assert verdict.stage == stage, f"{path.name}: {verdict.stage}: {verdict.reason}\n{verdict.detail}"
    assert reason in verdict.reason, f"{path.name}: reason was {verdict.reason!r}"
    assert verdict.call == (stage not in ("static", "call", "judge_error"))
    assert verdict.correct == (stage in ("passed", "performance"))


UNCONFINED = candidate_expectations("vector_add", gpu=False, confined=False)


@pytest.mark.slow
def test_attacks_the_sandbox_stops_are_handled_without_it():
    """--sandbox off (a machine without Landlock judges the same way in auto): what those
    candidates do then (kill their worker, ...) still ends in a verdict with a reason."""
    task = resolve_task("vector_add")
    options = JudgeOptions(seeds=2, seed=1234, load_timeout=60, call_timeout=8, case_timeout=8, sandbox="off")
    with JudgePool("cpu", workers=1, options=options) as pool:
        results = pool.judge_many([(task, path) for path, _, _ in UNCONFINED])
    assert UNCONFINED
    for (path, stage, reason), verdict in zip(UNCONFINED, results):
        assert verdict.stage == stage and reason in verdict.reason, (path.name, verdict.stage, verdict.reason)
        assert verdict.sandbox.get("level", "off") == "off"


@pytest.mark.slow
def test_printed_text_is_never_parsed(verdicts):
    verdict = verdicts[0]["prints_pass.py"]
    assert "All tests PASSED" in verdict.log_tail  # kept for the reflector, as text
    assert verdict.stage == "correctness"


@pytest.mark.slow
def test_a_timeout_shows_where_the_candidate_was_stuck(verdicts):
    verdict = verdicts[0]["host_infinite_loop.py"]
    assert "timed out" in verdict.reason
    # every thread's stack, dumped before the kill: the loop's lines are named (`while True:` or
    # `pass`, wherever the signal found it)
    assert re.search(r'host_infinite_loop\.py", line 2[12] in vector_add', verdict.log_tail), verdict.log_tail


@pytest.mark.slow
def test_passing_verdict_records_kernels_and_seeds(verdicts):
    verdict = verdicts[0]["good.py"]
    assert verdict.kernels.get("add_kernel", 0) >= 1
    assert len(verdict.seeds) == 2
    checked = [c for c in verdict.cases if c.kind == "correctness" and c.ok]
    assert checked and all(len(c.seeds) == 2 and c.launches >= 2 for c in checked)
    skipped = [c for c in verdict.cases if c.ok is None]
    assert all("interpreter" in c.reason for c in skipped)  # bf16 is skipped with a reason


@pytest.mark.slow
def test_no_process_outlives_its_verdict(verdicts):
    _, daemon, leftovers, worker_pids = verdicts
    # each worker keeps exactly its reference child and one spare candidate and reference child
    for pid, children in leftovers.items():
        assert len(children) <= 3, f"worker {pid} has stray children {children}"
    assert daemon is not None, "the escaping candidate did not run"
    for _ in range(50):
        if not _named(daemon):
            break
        time.sleep(0.1)
    assert not _named(daemon), "a daemonized grandchild survived"
    for pid in worker_pids:  # the pool closed its workers
        assert not os.path.exists(f"/proc/{pid}") or _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.slow
def test_a_spare_reference_process_serves_the_next_task():
    """Each worker forks a reference process ahead, like its spare candidate: it survives the
    stray collection after a verdict whose reference was reused (same task twice), then serves
    the next task's reference."""
    first, second = resolve_task("vector_add"), resolve_task("silu")
    options = JudgeOptions(seeds=1, perf=False, load_timeout=60, call_timeout=30, case_timeout=30)
    with JudgePool("cpu", workers=1, options=options) as pool:
        verdicts = pool.judge_many([(first, first.triton_reference), (first, first.triton_reference),
                                    (second, second.triton_reference)])
        worker = pool._workers[0].process.pid
        children = children_of(worker)
    assert [v.stage for v in verdicts] == ["passed"] * 3, [(v.stage, v.reason) for v in verdicts]
    assert len(children) == 3, children  # silu's reference, a spare candidate, a spare reference
