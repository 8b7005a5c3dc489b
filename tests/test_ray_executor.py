"""`--executor ray` (issue 33) on a local two-node Ray cluster (`ray.cluster_utils.Cluster`, CPU,
Triton's interpreter; each node's GPU simulated as the custom resource `kw_gpu`): the same
verdicts (judge-suite) and run directories (bench, generate, optimize) as the local executor, and
a judging actor killed mid-candidate loses no result and doubles none. Skipped where Ray is not installed (it is the optional extra `kernelwright[ray]`)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

ROOT = Path(__file__).resolve().parent
TASKS = "vector_add,silu,softmax,row_sum"
# a passing candidate, two wrong ones and one that does not define its entry point
CANDIDATES = {"vector_add": "vector_add/good.py", "silu": "silu/exp_ratio.py",
              "softmax": "softmax/no_max_subtraction.py", "row_sum": "vector_add/no_entry.py"}


@pytest.fixture(scope="module")
def shared_cluster():
    """Two nodes of one (simulated) GPU each; num_cpus=1 so that Ray's own workers fit 2 cores."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"kw_gpu": 1}})
    c.add_node(num_cpus=1, resources={"kw_gpu": 1})
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture
def cluster(shared_cluster):
    """The shared cluster, this process connected to it (a test with a cluster of its own
    disconnects)."""
    if not ray.is_initialized():
        ray.init(address=shared_cluster.address, include_dashboard=False, log_to_driver=False)
    return shared_cluster


@pytest.fixture
def candidates(tmp_path):
    folder = tmp_path / "candidates"
    folder.mkdir()
    for task, source in CANDIDATES.items():
        shutil.copy(ROOT / "candidates" / source, folder / f"{task}.py")
    return folder


def verdicts(out: Path) -> dict[str, tuple]:
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == len({line["task"] for line in lines}), "a task recorded twice"
    return {line["task"]: (line["verdict"]["kind"], line["verdict"]["stage"], line["verdict"]["correct"])
            for line in lines}


@pytest.mark.slow
def test_ray_executor_gives_the_local_verdicts(cluster, candidates, tmp_path, kernelwright_here):
    common = ["judge-suite", "--suite", "builtin", "--candidates", str(candidates), "--tasks", TASKS,
              "--judge-seeds", "1", "--device", "cpu"]
    local = kernelwright_here(*common, "--out", str(tmp_path / "local.jsonl"))
    assert local.returncode == 0, local.stderr
    remote = kernelwright_here(*common, "--executor", "ray", "--address", cluster.address,
                               "--out", str(tmp_path / "ray.jsonl"))
    assert remote.returncode == 0, remote.stderr
    expected = verdicts(tmp_path / "local.jsonl")
    assert sorted(expected) == sorted(TASKS.split(","))
    assert expected["vector_add"][2] is True and expected["silu"][2] is False
    assert verdicts(tmp_path / "ray.jsonl") == expected


@pytest.mark.slow
def test_an_actor_killed_mid_candidate_loses_and_doubles_nothing(cluster):
    from kernelwright.judge import JudgeOptions
    from kernelwright.scale.raypool import RayJudgePool
    from kernelwright.suites.runner import load_suite_tasks

    tasks = {t.name: t for t in load_suite_tasks("builtin", None)[0]}
    good = (ROOT / "candidates" / "vector_add" / "good.py").read_text()
    with RayJudgePool(options=JudgeOptions(seeds=1)) as pool:
        assert pool.n_workers == 2
        futures = [pool.submit(tasks["vector_add"], good, candidate_id=f"c{i}") for i in range(6)]
        deadline = time.monotonic() + 300
        victim = None
        while victim is None and time.monotonic() < deadline:
            victim = next((h for h in pool._workers if h is not None and h.busy and h.info), None)
            time.sleep(0.05)
        assert victim is not None, "no actor was ever busy"
        ray.kill(victim.actor, no_restart=True)
        results = [f.result(timeout=600) for f in futures]
    assert sorted(v.candidate_id for v in results) == [f"c{i}" for i in range(6)]
    assert all(v.correct for v in results), [v.reason for v in results if not v.correct]
    assert len(pool.health.retired) == 1


@pytest.mark.slow
def test_bench_across_the_cluster_writes_the_local_run(cluster, tmp_path, kernelwright_here, monkeypatch):
    """The scripted model, one task-run at a time (a known order): the same metrics and results
    with the judge on the cluster as on this host."""
    from kernelwright.scale import raypool
    from kernelwright.llm.testing import ScriptedServer

    judged_on_ray = []
    original = raypool.RayWorkerHandle.judge
    monkeypatch.setattr(raypool.RayWorkerHandle, "judge",
                        lambda self, *a: judged_on_ray.append(self.index) or original(self, *a))

    from .agent.agent_support import PING_ANSWER
    from .agent.test_bench import R, ans, bench_flags, broken, good

    va_good, va_bad = ans(good("vector_add")), ans(broken("vector_add", "vector_add"))
    sequence = [PING_ANSWER, va_good, va_bad, R, va_good]  # run 0 passes at once, run 1 after a fix
    reports = {}
    for executor in ("local", "ray"):
        extra = ["--executor", "ray", "--address", cluster.address] if executor == "ray" else []
        with ScriptedServer({"sequence": sequence}) as server:
            proc = kernelwright_here(*bench_flags(server, tmp_path / executor, "--tasks", "vector_add", "--runs", "2",
                                                  "--iterations", "2", "--concurrency", "1", *extra))
        assert proc.returncode == 0, proc.stderr
        reports[executor] = json.loads(proc.stdout)
    assert reports["ray"]["per_iteration"] == reports["local"]["per_iteration"]
    assert reports["ray"]["per_runs"] == reports["local"]["per_runs"]
    assert reports["ray"]["judge"]["candidates"] == reports["local"]["judge"]["candidates"] == 3
    assert len(judged_on_ray) == 3  # the ray run's candidates went through the actors, the local one's did not


def test_one_actor_per_gpu_per_simulated_gpu_or_per_node():
    from types import SimpleNamespace

    from kernelwright.scale.raypool import actor_slots

    def fake(resources, nodes=()):
        return SimpleNamespace(cluster_resources=lambda: resources, nodes=lambda: list(nodes))

    assert actor_slots(fake({"GPU": 3.0, "kw_gpu": 8.0})) == [{"num_gpus": 1, "num_cpus": 0}] * 3
    assert actor_slots(fake({"kw_gpu": 2.0})) == [{"resources": {"kw_gpu": 1}, "num_cpus": 0}] * 2
    slots = actor_slots(fake({"CPU": 4.0}, [{"NodeID": "a" * 56, "Alive": True}, {"NodeID": "b" * 56, "Alive": False},
                                            {"NodeID": "c" * 56, "Alive": True}]))
    assert [s["scheduling_strategy"].node_id for s in slots] == ["a" * 56, "c" * 56]
    assert all(s["scheduling_strategy"].soft is False for s in slots)


@pytest.mark.slow
def test_a_node_removed_mid_candidate_loses_and_doubles_nothing():
    """A whole node goes (its raylet and processes killed) while its actor judges: every
    candidate still gets exactly one verdict, judged on the node that is left."""
    from kernelwright.judge import JudgeOptions
    from kernelwright.scale.raypool import RayJudgePool
    from kernelwright.suites.runner import load_suite_tasks

    if ray.is_initialized():
        ray.shutdown()  # this test needs a cluster of its own (the module's stays whole)
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"kw_gpu": 1}})
    doomed = c.add_node(num_cpus=1, resources={"kw_gpu": 1})
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    try:
        task = next(t for t in load_suite_tasks("builtin", None)[0] if t.name == "vector_add")
        good = (ROOT / "candidates" / "vector_add" / "good.py").read_text()
        with RayJudgePool(options=JudgeOptions(seeds=1)) as pool:
            futures = [pool.submit(task, good, candidate_id=f"c{i}") for i in range(6)]
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and not any(
                    h is not None and h.busy and (h.info or {}).get("node_id") == doomed.node_id for h in pool._workers):
                time.sleep(0.05)
            c.remove_node(doomed)
            results = [f.result(timeout=600) for f in futures]
        assert sorted(v.candidate_id for v in results) == [f"c{i}" for i in range(6)]
        assert all(v.correct for v in results), [v.reason for v in results if not v.correct]
        assert len(pool.health.retired) == 1
    finally:
        ray.shutdown()
        c.shutdown()


def test_perf_on_a_cluster_without_gpus_is_refused_as_on_the_cpu(cluster, tmp_path, kernelwright_here):
    proc = kernelwright_here("judge-suite", "--suite", "builtin", "--candidates", "reference", "--tasks", "vector_add",
                             "--perf", "--executor", "ray", "--address", cluster.address,
                             "--out", str(tmp_path / "r.jsonl"))
    assert proc.returncode == 2
    assert "--perf under Triton's CPU interpreter refused" in " ".join(proc.stderr.split())


@pytest.mark.slow
def test_closing_mid_candidate_records_nothing_for_what_was_not_judged(cluster):
    """Ctrl-C: a candidate whose actor is killed by the close raises PoolClosed (a resumed run
    judges it), never a judge error that would be stored as final."""
    from kernelwright.judge import JudgeOptions, PoolClosed
    from kernelwright.scale.raypool import RayJudgePool
    from kernelwright.suites.runner import load_suite_tasks

    task = next(t for t in load_suite_tasks("builtin", None)[0] if t.name == "vector_add")
    good = (ROOT / "candidates" / "vector_add" / "good.py").read_text()
    pool = RayJudgePool(options=JudgeOptions(seeds=1))
    futures = [pool.submit(task, good) for _ in range(4)]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(h is not None and h.busy and h.info for h in pool._workers):
        time.sleep(0.05)
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 20  # busy actors are killed, not waited for
    for future in futures:
        try:
            assert future.result(timeout=60).correct
        except PoolClosed:
            pass


def run_dir_contents(run: Path) -> dict:
    """What a generate/optimize run wrote that does not depend on timing: each attempt's task-run,
    mode and verdict (in the order of each task-run), and the best kernels."""
    import sqlite3

    with sqlite3.connect(run / "run.sqlite") as conn:
        attempts = sorted(conn.execute("SELECT task, run, idx, mode, kind FROM attempts").fetchall(),
                          key=lambda a: (a[0], a[1], a[2]))
    best = {p.name: p.read_text() for p in sorted((run / "best").iterdir())}
    return {"attempts": [(t, r, mode, kind) for t, r, _, mode, kind in attempts], "best": best}


@pytest.mark.slow
def test_generate_runs_across_the_cluster_write_the_local_run(cluster, tmp_path, kernelwright_here, monkeypatch):
    """`generate --runs 2`, both runs in flight (no --concurrency): on the cluster's actors, the
    same attempts, verdicts and best kernel as with the local executor. The script answers by
    prompt, so the runs' order does not matter: each run's first kernel fails, its fix passes."""
    from kernelwright.scale import raypool
    from kernelwright.llm.testing import ScriptedServer

    judged_on_ray = []
    original = raypool.RayWorkerHandle.judge
    monkeypatch.setattr(raypool.RayWorkerHandle, "judge",
                        lambda self, *a: judged_on_ray.append(self.index) or original(self, *a))

    from .agent.agent_support import FIX_MARK, REFLECT_MARK
    from .agent.test_bench import ans, broken, good

    script = {"rules": [{"match": REFLECT_MARK, "content": "the entry point calls an undefined helper"},
                        {"match": FIX_MARK, **ans(good("vector_add"))}],
              "default": ans(broken("vector_add", "vector_add"))}
    contents, outputs = {}, {}
    for executor in ("local", "ray"):
        extra = ["--executor", "ray", "--address", cluster.address] if executor == "ray" else []
        with ScriptedServer(script) as server:
            proc = kernelwright_here("generate", "--task", "vector_add", "--model", "openai-compatible/scripted",
                                     "--base-url", server.openai_base_url, "--no-cache", "--device", "cpu",
                                     "--judge-seeds", "1", "--llm-seed", "5", "--runs", "2", "--iterations", "3",
                                     "--out", str(tmp_path / executor), "--json", *extra)
        assert proc.returncode == 0, proc.stderr
        contents[executor], outputs[executor] = run_dir_contents(tmp_path / executor), json.loads(proc.stdout)
    assert contents["local"]["attempts"] == [("vector_add", r, mode, kind) for r in (0, 1)
                                             for mode, kind in (("generate", "runtime_error"), ("fix", "passed"))]
    assert contents["ray"] == contents["local"]
    assert list(contents["ray"]["best"]) == ["vector_add.py"]
    assert [r["runs"] for r in outputs["ray"]["results"]] == [r["runs"] for r in outputs["local"]["results"]] == [2]
    assert len(judged_on_ray) == 4  # the ray run's candidates went through the actors, the local one's did not
    # the run started locally, resumed on the cluster (the executor is the machine's, not the run's)
    with ScriptedServer(script) as server:
        proc = kernelwright_here("generate", "--resume", str(tmp_path / "local"), "--runs", "3", "--base-url",
                                 server.openai_base_url, "--no-cache", "--executor", "ray", "--address",
                                 cluster.address, "--json")
    assert proc.returncode == 0, proc.stderr
    resumed = run_dir_contents(tmp_path / "local")["attempts"]
    assert resumed == contents["local"]["attempts"] + [("vector_add", 2, "generate", "runtime_error"),
                                                       ("vector_add", 2, "fix", "passed")]
    assert len(judged_on_ray) == 6


@pytest.mark.slow
def test_optimize_on_the_cluster_starts_from_the_users_kernel(cluster, tmp_path, kernelwright_here):
    """optimize --executor ray: the user's kernel, then the optimizer's, judged and timed on the
    cluster (the interpreter: --perf --force), as test_agent_cli has it with the local executor."""
    from kernelwright.llm.testing import ScriptedServer

    from .agent.agent_support import GOOD, TINY_ADD, answer, kernel

    mine = tmp_path / "mine.py"
    mine.write_text(GOOD)
    with ScriptedServer({"default": answer(kernel(8192), "Larger blocks.")}) as server:
        proc = kernelwright_here("optimize", str(mine), "--task", str(TINY_ADD), "--iterations", "1", "--perf",
                                 "--force", "--model", "openai-compatible/scripted", "--base-url",
                                 server.openai_base_url, "--no-cache", "--device", "cpu", "--judge-seeds", "1",
                                 "--executor", "ray", "--address", cluster.address, "--out", str(tmp_path / "run"),
                                 "--json")
    assert proc.returncode in (0, 1), proc.stderr
    attempts = run_dir_contents(tmp_path / "run")["attempts"]
    assert [(mode, kind) for _, _, mode, kind in attempts] == [("given", "passed"), ("optimize", "passed")]
    assert json.loads(proc.stdout)["results"][0]["given_speedup"] is not None  # timed on the cluster
