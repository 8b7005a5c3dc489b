"""--search evolve end to end: the real LLM client over HTTP to the local editing model, the real
judge on the CPU interpreter (timed with tiny perf settings, so the optimizer is asked), the
archive rebuilt from the run store."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from .agent_support import GOOD, PING, REFLECT_MARK, TINY_ADD, run_agent, spec
from .test_agent_cli import cli, finish, llm_flags, rows
from .test_agent_e2e import QUICK_PERF
from kernelwright.agent.archive import Archive, iteration_epochs
from kernelwright.agent.memory import Attempt, Mode
from kernelwright.llm.testing import EditingModel, EditingServer
from kernelwright.llm.testing.editing_model import builtin_seeds
from kernelwright.store import RunStore

pytestmark = pytest.mark.slow
SEED = 7


def _requests_of_run(server, run: int) -> list[str]:
    return [r.prompt for r in server.requests if r.prompt.strip() != PING and r.body.get("seed") == SEED + run]


def test_editing_model_is_deterministic_and_borrows_from_inspirations():
    model = EditingModel({"tiny_add": GOOD})
    parent = GOOD
    donor = GOOD.replace("BLOCK=1024", "BLOCK=4096").replace("cdiv(n, 1024)", "cdiv(n, 4096)")
    prompt = (f"## Task: tiny_add\n\n## The kernel to improve: the parent\n\n```python\n{parent}```\n\n"
              f"## Inspirations: verified kernels\n\n### Inspiration 1\n```python\n{donor}```\n\n## Your job\n")
    answers = [model.answer(prompt, s) for s in range(12)]
    assert answers == [model.answer(prompt, s) for s in range(12)]  # deterministic per seed
    assert len(set(answers)) > 1
    assert any("4096" in a and "take `" in a for a in answers)  # a line taken from the inspiration
    crossover = prompt.replace("## The kernel to improve: the parent", "## Two correct kernels from different cells") \
        .replace("## Inspirations: verified kernels\n\n### Inspiration 1", "### Kernel B") + "Combine the two kernels"
    assert "4096" in model.answer(crossover, 1)


def test_evolve_runs_share_one_archive(tmp_path):
    # every first kernel fails (the reflector runs whatever the draws); later answers break at random
    with EditingServer({"tiny_add": GOOD}, break_rate=0.2, break_first=True) as server:
        store, results = run_agent(tmp_path / "run", server, spec(iterations=6, runs=2, search="evolve",
                                                                  migrate_every=2), judge_options=QUICK_PERF)
        attempts = store.attempts("tiny_add")
        archive = Archive.of(attempts)
        # only judge-passed kernels are in it; the failing ones went through the reflector as before
        assert archive.entries and all(e.attempt.passed for e in archive.entries)
        failed = [a for a in attempts if not a.passed]
        assert failed and any(REFLECT_MARK in r.prompt for r in server.requests)
        for a in failed:  # a failing kernel is never shown as a parent or an inspiration
            assert all(a.code not in p.split("## Your job")[0].split("## The kernel to improve")[-1]
                       for p in (r.prompt for r in server.requests) if "## The kernel to improve" in p) \
                or any(a.code == e.code for e in archive.entries)
        # a kernel of one run reaches the other's prompt, and only after the first epoch (migration)
        by_run = {r: [a for a in attempts if a.run == r] for r in (0, 1)}
        crossed = []
        for a in attempts:
            for run, index in re.findall(r"r(\d)a(\d+)", a.origin):
                if int(run) != a.run:
                    source = by_run[int(run)][int(index)]
                    crossed.append((a, source))
                    # migrated at a boundary: the source's epoch is before the attempt's
                    assert iteration_epochs(by_run[source.run], 2)[source.index] < \
                        iteration_epochs(by_run[a.run], 2)[a.index]
                    assert iteration_epochs(by_run[a.run], 2)[a.index] >= 1
        assert crossed, [a.origin for a in attempts]
        # the other island's kernel is in the prompt its attempt was built from
        assert all(any(source.code.strip() in p for p in _requests_of_run(server, a.run)) for a, source in crossed)
        assert {a.mode for a in attempts} >= {Mode.GENERATE, Mode.OPTIMIZE}
    assert results[0].best is not None


def test_evolve_with_one_run(tmp_path):
    with EditingServer({"tiny_add": GOOD}) as server:
        store, results = run_agent(tmp_path / "run", server, spec(iterations=3, runs=1, search="evolve"),
                                   judge_options=QUICK_PERF)
        attempts = store.attempts("tiny_add")
    assert len(attempts) == 3 and all(a.origin.startswith(("optimize of r0", "crossover of r0"))
                                      for a in attempts[1:])
    assert results[0].best is not None and store.ended()[("tiny_add", 0)]["reason"] == "all iterations done"


def _archive(run_dir) -> list[tuple]:
    with RunStore(run_dir, create=False, decode=Attempt.from_dict) as store:
        return [(e.key, e.code, e.speedup, e.cell, e.epoch) for e in Archive.of(store.attempts()).entries]


def test_sigkill_then_resume_same_archive_no_repeated_request(tmp_path):
    run = tmp_path / "run"
    flags = ["--suite", "builtin", "--tasks", "vector_add", "--search", "evolve", "--runs", "2", "--iterations", "4",
             "--llm-seed", str(SEED), "--perf", "--force", "--max-perf-cases", "1", "--out", str(run)]
    with EditingServer(builtin_seeds(), delay_s=0.5) as server:
        proc = cli("bench", *flags, *llm_flags(server))
        deadline = time.monotonic() + 400
        while len(rows(run / "run.sqlite", "SELECT idx FROM attempts")) < 4:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        before = _archive(run)
        answered = {(r.prompt, r.body.get("seed")) for r in server.requests[:-2] if r.prompt.strip() != PING}
        n_before = len(server.requests)
        code, data, err = finish(cli("bench", "--resume", str(run), "--base-url", server.openai_base_url,
                                      "--no-cache", "--json"), timeout=600)
        after = [(r.prompt, r.body.get("seed")) for r in server.requests[n_before:] if r.prompt.strip() != PING]
    assert code == 0, err
    assert not answered & set(after)  # nothing answered before the kill was asked again
    full = _archive(run)
    assert [e for e in full if e[0] in {b[0] for b in before}] == before
    assert len(rows(run / "run.sqlite", "SELECT idx FROM attempts")) == 8
