"""One CLI vocabulary (issue 27, item 3): the same flag means the same thing on every command.

--tasks (repeatable and comma lists), the seed flags (--judge-seeds, --judge-base-seed, --llm-seed),
--concurrency / --llm-concurrency, --timeout-scale and --workers-per-device, renamed flags answered
with their new names, and every command's help readable at 80 columns. The judge and the LLM are
stubbed where a command would start them: these tests check what the flags turn into."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

import pytest
from typer.main import get_command

from kernelwright.cli import app
from kernelwright.cli.options import AGENT, AgentOptions, parse_tasks

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "candidates" / "vector_add" / "good.py"
OFFLINE = ["--model", "openai/gpt-4.1", "--offline", "--device", "cpu"]  # no key, no server: nothing is called


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


class Stop(Exception):
    """Raised by a stub where the command would start judging: what it was given is recorded."""


@pytest.fixture
def captured(monkeypatch):
    """Stubs for the judge pool and the agent's run: they record their arguments and stop."""
    seen: dict = {}

    class FakePool:
        def __init__(self, device="auto", workers=None, options=None, workers_per_device=1):
            seen["pool"] = {"device": device, "workers": workers, "options": options,
                            "workers_per_device": workers_per_device}
            raise Stop

    def fake_run_agent(store, spec, opts, concurrency=None, in_flight=None, before_calls=None):
        seen["agent"] = {"spec": spec, "opts": opts, "concurrency": concurrency, "in_flight": in_flight}
        store.close()
        raise Stop

    monkeypatch.setattr("kernelwright.judge.JudgePool", FakePool)
    monkeypatch.setattr("kernelwright.cli.agent_cmds.run_agent", fake_run_agent)
    monkeypatch.setattr("kernelwright.cli.bench_cmds.run_agent", fake_run_agent)
    return seen


class ReadyPool:
    """Enough of a judge pool for judge-suite to load, select and plan (it starts no worker)."""

    n_workers = n_devices = 1
    backend = "cpu"

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def start(self, wait=True):
        return self


def stopped(result) -> None:
    assert isinstance(result.exception, Stop), (result.exit_code, result.output, result.exception)


# -- --tasks -----------------------------------------------------------------------------------

def test_parse_tasks_takes_repeats_and_comma_lists_in_order_once_each():
    assert parse_tasks(["a,b", "c", " a , d,", ""]) == ("a", "b", "c", "d")
    assert parse_tasks(None) == () and parse_tasks([]) == ()


def test_judge_suite_tasks_twice_and_comma_lists_judge_every_one(runner, captured, tmp_path, monkeypatch):
    """The bug: `--tasks a --tasks b` judged only b. Every name given is planned now."""
    planned: list[str] = []
    import kernelwright.suites.runner as suite_runner

    real_plan = suite_runner.plan

    def spy_plan(tasks, *args, **kwargs):
        tasks = list(tasks)
        planned.extend(t.name for t in tasks)
        return real_plan(tasks, *args, **kwargs)

    def no_judging(work, store, pool, on_record=None, options=None):
        raise Stop

    monkeypatch.setattr("kernelwright.judge.JudgePool", ReadyPool)
    monkeypatch.setattr(suite_runner, "plan", spy_plan)
    monkeypatch.setattr(suite_runner, "run_suite", no_judging)
    result = runner.invoke(app, ["judge-suite", "--suite", "builtin", "--candidates", "reference", "--device", "cpu",
                                 "--tasks", "vector_add", "--tasks", "silu,gelu", "--out", str(tmp_path / "r.jsonl")])
    stopped(result)
    assert sorted(planned) == ["gelu", "silu", "vector_add"]


@pytest.mark.parametrize("command", [
    ["judge-suite", "--suite", "builtin", "--candidates", "reference", "--device", "cpu"],
    ["bench", "--suite", "builtin", *OFFLINE],
    ["tasks"],
])
def test_unknown_tasks_fail_fast_naming_them_and_how_to_list(runner, captured, tmp_path, monkeypatch, command):
    monkeypatch.setattr("kernelwright.judge.JudgePool", ReadyPool)  # judge-suite loads the suite as workers start
    result = runner.invoke(app, [*command, "--tasks", "vector_add,vectr_add", "--tasks", "nope,silu",
                                 "--out", str(tmp_path / "out")] if command[0] != "tasks" else
                           [*command, "--tasks", "vector_add,vectr_add", "--tasks", "nope,silu"])
    assert result.exit_code == 2, result.output
    err = flat(result.stderr)
    assert "unknown task(s) in --tasks: 'vectr_add' (did you mean vector_add?); 'nope'" in err
    assert "`kernelwright tasks --suite builtin` lists the" in err
    assert "'silu'" not in err
    assert "agent" not in captured
    assert not (tmp_path / "out").exists()


def test_bench_takes_comma_lists_and_repeats(runner, captured, tmp_path):
    result = runner.invoke(app, ["bench", "--suite", "builtin", *OFFLINE, "--tasks", "vector_add,silu",
                                 "--tasks", "gelu", "--out", str(tmp_path / "run")])
    stopped(result)
    spec = captured["agent"]["spec"]
    assert [Path(r).stem for r in spec.task_refs] == ["vector_add", "silu", "gelu"]


def test_every_tasks_flag_takes_repeats_and_comma_lists():
    """Everywhere --tasks exists (issue 29 item 5): every CLI command's is the shared repeatable
    option (parsed by parse_tasks), and the benchmarks/ scripts' is `add_tasks_argument`, which
    takes space-separated names, comma lists and repeats alike."""
    import argparse

    from kernelwright.cli.options import add_tasks_argument

    def commands(group, prefix=""):
        for name, cmd in getattr(group, "commands", {}).items():
            yield f"{prefix}{name}", cmd
            yield from commands(cmd, f"{prefix}{name} ")

    with_tasks = [(name, p) for name, cmd in commands(get_command(app)) for p in cmd.params if "--tasks" in p.opts]
    assert {name for name, _ in with_tasks} >= {"tasks", "judge-suite", "bench"}
    assert all(p.multiple for _, p in with_tasks), [name for name, p in with_tasks if not p.multiple]
    own_flag = re.compile(r'add_argument\(\s*"--tasks"')
    scripts = [p.name for p in (ROOT / "benchmarks").glob("*.py") if own_flag.search(p.read_text())]
    assert not scripts, f"use kernelwright.cli.options.add_tasks_argument in {scripts}"
    parser = argparse.ArgumentParser()
    add_tasks_argument(parser, default=["softmax"])
    assert parser.parse_args([]).tasks == ["softmax"]
    assert parser.parse_args(["--tasks", "a", "b,c", "--tasks", "d,a"]).tasks == ["a", "b", "c", "d"]


def test_tasks_lists_only_the_named_ones(runner):
    result = runner.invoke(app, ["tasks", "--tasks", "softmax", "--tasks", "vector_add,softmax", "--json"])
    assert result.exit_code == 0, result.output
    assert sorted(t["name"] for t in json.loads(result.stdout)["tasks"]) == ["softmax", "vector_add"]


# -- seeds, concurrency, timeouts, workers ------------------------------------------------------

def test_eval_maps_the_judge_flags(runner, captured):
    result = runner.invoke(app, ["eval", str(GOOD), "--task", "vector_add", "--device", "cpu", "--judge-seeds", "2",
                                 "--judge-base-seed", "5", "--timeout-scale", "2", "--workers-per-device", "3"])
    stopped(result)
    pool = captured["pool"]
    options = pool["options"]
    assert (options.seeds, options.seed, pool["workers_per_device"]) == (2, 5, 3)
    assert options.load_timeout == 240.0 and options.run_timeout == 60.0 and options.compile_timeout == 1200.0


def test_eval_defaults_are_unchanged(runner, captured):
    stopped(runner.invoke(app, ["eval", str(GOOD), "--task", "vector_add", "--device", "cpu"]))
    options = captured["pool"]["options"]
    assert (options.seeds, options.seed, options.load_timeout, captured["pool"]["workers_per_device"]) == (3, None, 120.0, 1)


def test_judge_suite_maps_the_judge_flags(runner, captured, tmp_path):
    result = runner.invoke(app, ["judge-suite", "--suite", "builtin", "--candidates", "reference", "--device", "cpu",
                                 "--judge-seeds", "4", "--judge-base-seed", "9", "--timeout-scale", "0.5",
                                 "--workers-per-device", "2", "--out", str(tmp_path / "r.jsonl")])
    stopped(result)
    pool = captured["pool"]
    options = pool["options"]
    assert (options.seeds, options.seed, pool["workers_per_device"]) == (4, 9, 2)
    assert options.case_timeout == 30.0 and options.perf_blocks == 4  # the quick timing profile still applies


AGENT_FLAGS = ["--llm-seed", "7", "--judge-seeds", "2", "--judge-base-seed", "5", "--timeout-scale", "0.5",
               "--workers-per-device", "2", "--concurrency", "3", "--llm-concurrency", "4"]


@pytest.mark.parametrize("command", [
    ["generate", "--task", "vector_add"],
    ["optimize", str(GOOD), "--task", "vector_add", "--perf", "--force"],
    ["bench", "--suite", "builtin", "--tasks", "vector_add"],
])
def test_agent_commands_take_the_unified_flags(runner, captured, tmp_path, command):
    result = runner.invoke(app, [*command, *OFFLINE, *AGENT_FLAGS, "--out", str(tmp_path / "run")])
    stopped(result)
    spec, opts = captured["agent"]["spec"], captured["agent"]["opts"]
    assert spec.settings.seed == 7 and spec.judge_seeds == 2 and spec.judge_base_seed == 5
    assert spec.timeout_scale == 0.5
    assert opts.workers_per_device == 2 and opts.llm_concurrency == 4
    assert captured["agent"]["concurrency"] == 3 and captured["agent"]["in_flight"] == 3
    stored = json.loads(json.dumps(spec.to_dict()))  # what a resume reads back
    assert stored["judge_base_seed"] == 5 and stored["timeout_scale"] == 0.5


def test_the_agents_judge_pool_gets_the_spec_and_workers_per_device(tmp_path):
    from kernelwright.cli.agent_cmds import _judge_pool
    from kernelwright.cli.agent_runs import llm_flags

    opts = AgentOptions(device="cpu", judge_seeds=2, judge_base_seed=5, timeout_scale=0.5, llm_concurrency=6)
    spec = opts.run_spec("generate", task_refs=("vector_add",), model="openai/gpt-4.1")
    with _judge_pool(spec, in_flight=1, workers_per_device=3) as pool:
        assert pool.options.seeds == 2 and pool.options.seed == 5
        assert pool.options.load_timeout == 60.0 and pool.options.compile_timeout == 300.0
    assert llm_flags(opts)["concurrency"] == 6


def test_config_takes_llm_concurrency(runner):
    result = runner.invoke(app, ["config", "--llm-concurrency", "7", "--json"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)["llm.max_concurrency"]
    assert shown["value"] == 7 and "--llm-concurrency" in shown["source"]


# -- renamed flags ------------------------------------------------------------------------------

@pytest.mark.parametrize("args,old,new", [
    (["eval", str(GOOD), "--task", "vector_add", "--seeds", "2"], "--seeds", "--judge-seeds"),
    (["eval", str(GOOD), "--task", "vector_add", "--seed=5"], "--seed", "--judge-base-seed"),
    (["judge-suite", "--suite", "builtin", "--candidates", "reference", "--seeds", "1"], "--seeds", "--judge-seeds"),
    (["generate", "--task", "vector_add", "--seed", "3"], "--seed", "--llm-seed"),
    (["bench", "--seed", "3"], "--seed", "--llm-seed"),
    (["config", "--concurrency", "4"], "--concurrency", "--llm-concurrency"),
])
def test_a_removed_flag_names_its_replacement(runner, captured, args, old, new):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    err = flat(result.stderr)
    assert f"no option {old}:" in err and new in err
    assert not captured


def test_a_removed_flag_with_json_prints_an_error_object(capsys, monkeypatch):
    from kernelwright.cli import main

    monkeypatch.setattr("sys.argv", ["kernelwright", "eval", str(GOOD), "--task", "vector_add", "--seeds", "2",
                                     "--json"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    data = json.loads(capsys.readouterr().out)
    assert data["exit_code"] == 2 and "--judge-seeds" in data["error"]


def test_a_flag_after_double_dash_is_not_taken_for_a_renamed_one():
    from kernelwright.cli.options import renamed_flag

    assert renamed_flag(["--", "--seed"], set()) is None
    assert renamed_flag(["--seed", "1"], {"--seed"}) is None
    assert "--llm-seed" in renamed_flag(["--seed", "1"], set())


# -- options built once ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["generate", "optimize", "bench"])
def test_agent_commands_options_are_agentoptions_fields_with_its_defaults(name):
    command = get_command(app).commands[name]
    known = {f.name: f for f in fields(AgentOptions)}
    for param in command.params:
        assert param.name in known, f"{name}: {param.name} has no AgentOptions field"
        if param.name in ("tasks", "corpus"):
            continue  # lists on the command line, tuples in the options
        default = param.default() if callable(param.default) else param.default
        assert default == getattr(AGENT, param.name), (name, param.name, default)


def test_from_params_rejects_an_option_without_a_field():
    with pytest.raises(TypeError, match="no field"):
        AgentOptions.from_params({"runs": 1, "no_such_option": 2})


# -- help at 80 columns ------------------------------------------------------------------------

def _commands(command, path=()):
    yield list(path), command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


@pytest.mark.parametrize("path,command", list(_commands(get_command(app))), ids=lambda x: " ".join(x) if
                         isinstance(x, list) else "")
def test_help_at_80_columns_lists_every_option_whole(runner, path, command):
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert not [line for line in out.splitlines() if len(line) > 80]
    assert "…" not in out
    for param in command.params:
        for opt in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())):
            if opt.startswith("--"):
                assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", out), f"{path}: {opt} not listed whole"
        text = getattr(param, "help", None)
        if text:  # wrapped at spaces only: no word cut in two
            assert flat(text) in flat(out), f"{path}: the help of {param.name} is cut: {text!r}"


# -- --migrate-every (issue 32) ----------------------------------------------------------------

AGENT_COMMANDS = [
    ["generate", "--task", "vector_add"],
    ["optimize", str(GOOD), "--task", "vector_add", "--perf", "--force"],
    ["bench", "--suite", "builtin", "--tasks", "vector_add"],
]


@pytest.mark.parametrize("command", AGENT_COMMANDS)
def test_migrate_every_reaches_the_runs_settings_and_is_stored(runner, captured, tmp_path, command):
    from kernelwright.agent.archive import DEFAULT_MIGRATE_EVERY

    result = runner.invoke(app, [*command, *OFFLINE, "--search", "evolve", "--migrate-every", "3",
                                 "--out", str(tmp_path / "run")])
    stopped(result)
    spec = captured["agent"]["spec"]
    assert spec.settings.search == "evolve" and spec.settings.migrate_every == 3
    assert json.loads(json.dumps(spec.to_dict()))["settings"]["migrate_every"] == 3  # what a resume reads back
    captured.clear()
    result = runner.invoke(app, [*command, *OFFLINE, "--search", "evolve", "--out", str(tmp_path / "run2")])
    stopped(result)
    assert captured["agent"]["spec"].settings.migrate_every == DEFAULT_MIGRATE_EVERY == AGENT.migrate_every


@pytest.mark.parametrize("command", AGENT_COMMANDS)
@pytest.mark.parametrize("search", [[], ["--search", "independent"]])
def test_migrate_every_without_evolve_is_a_usage_error(runner, captured, tmp_path, command, search):
    out = tmp_path / "run"
    result = runner.invoke(app, [*command, *OFFLINE, *search, "--migrate-every", "3", "--out", str(out), "--json"])
    assert result.exit_code == 2, result.output
    assert "--migrate-every is for --search evolve" in flat(result.stderr)
    assert json.loads(result.stdout)["exit_code"] == 2
    assert not captured and not out.exists()  # nothing started, nothing written


def test_migrate_every_must_be_at_least_one(runner, captured, tmp_path):
    result = runner.invoke(app, ["generate", "--task", "vector_add", *OFFLINE, "--search", "evolve",
                                 "--migrate-every", "0", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "--migrate-every" in result.stderr and not captured


def test_a_resume_keeps_the_runs_migrate_every():
    from kernelwright.agent.app import RunSpec
    from kernelwright.agent.loop import AgentSettings
    from kernelwright.cli.agent_runs import refused_flags

    evolve = RunSpec("bench", ("/t/tiny_add.py",), "m", AgentSettings(search="evolve", migrate_every=3))
    given = frozenset({"migrate_every"})
    assert refused_flags(evolve, AgentOptions(migrate_every=3, given=given, resume=Path("r"))) == []
    assert refused_flags(evolve, AgentOptions(migrate_every=1, given=given, resume=Path("r"))) == [
        "--migrate-every (the run's: 3)"]
    independent = RunSpec("bench", ("/t/tiny_add.py",), "m", AgentSettings())
    assert refused_flags(independent, AgentOptions(migrate_every=2, given=given, resume=Path("r"))) == [
        "--migrate-every (the run's search: independent; only evolve has epochs)"]


# -- attempt modes are the Mode enum, not strings -----------------------------------------------

def test_progress_counts_the_models_attempts_by_mode():
    """The bar counts attempts the model wrote (Mode.by_llm): not the user's given kernel, not a
    tuned variant."""
    from kernelwright.agent.memory import Attempt, Mode
    from kernelwright.cli.agent_progress import AgentProgress

    progress = AgentProgress(tasks=1, runs=1, iterations=3, quiet=True)
    for index, mode in enumerate(Mode):
        progress.event("attempt", {"attempt": Attempt("t", 0, index, mode, 0, None, None)})
    assert progress.done == sum(m.by_llm for m in Mode) == 5  # generate, fresh, fix, optimize, crossover
    assert not Mode.GIVEN.by_llm and not Mode.TUNE.by_llm and Mode.FIX.by_llm


# -- --executor / --address (issue 33) ------------------------------------------------------------

@pytest.mark.parametrize("args, says", [(["--executor", "slurm"], "unknown executor 'slurm'"),
                                        (["--address", "auto"], "--address is for --executor ray")])
def test_judge_suite_refuses_a_bad_executor(runner, tmp_path, args, says):
    result = runner.invoke(app, ["judge-suite", "--suite", "builtin", "--candidates", "reference", "--device", "cpu",
                                 *args, "--out", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 2 and says in flat(result.output)


def test_executor_ray_without_ray_says_how_to_install(runner, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    result = runner.invoke(app, ["judge-suite", "--suite", "builtin", "--candidates", "reference",
                                 "--executor", "ray", "--out", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 2
    assert "pip install 'kernelwright[ray]'" in flat(result.output)


def test_bench_passes_the_executor_to_the_judge_pool(monkeypatch):
    from kernelwright.cli import agent_cmds

    seen = {}
    monkeypatch.setattr("kernelwright.scale.raypool.RayJudgePool",
                        lambda address, options: seen.update(address=address, options=options) or "pool")
    spec = type("Spec", (), {"judge_seeds": 1, "judge_base_seed": None, "perf": False, "timeout_scale": 1.0,
                             "max_perf_cases": None, "sandbox": "auto", "profile": "off", "device": "cpu"})()
    assert agent_cmds._judge_pool(spec, 1, None, "ray", "10.0.0.1:6379") == "pool"
    assert seen["address"] == "10.0.0.1:6379" and seen["options"].seeds == 1


# -- --gpus (issue 33) ----------------------------------------------------------------------------

def test_gpus_pins_each_worker_to_one_of_the_chosen_gpus(monkeypatch):
    from kernelwright.judge.coordinator import pool as pool_module
    from kernelwright.judge.coordinator.workerhandle import pin_device

    monkeypatch.setattr(pool_module, "detect_backend", lambda device: ("cuda", 4))
    started = []

    class Handle:
        def __init__(self, backend, index, options, **kw):
            started.append(index)
            self.process = type("P", (), {"poll": lambda self: None, "pid": 0})()

        def close(self):
            pass

    monkeypatch.setattr(pool_module, "WorkerHandle", Handle)
    with pool_module.JudgePool("cuda", workers_per_device=2, gpus=(0, 2)) as pool:
        pool.start(wait=False)
        assert (pool.n_devices, pool.n_workers) == (2, 4)
    assert sorted(started) == [0, 0, 2, 2]
    env = {}
    pin_device(env, "cuda", 2)
    assert env == {"CUDA_VISIBLE_DEVICES": "2"}
    env = {"HIP_VISIBLE_DEVICES": "4,5,6"}  # --gpus counts the GPUs this process sees
    pin_device(env, "hip", 2)
    assert env == {"HIP_VISIBLE_DEVICES": "6"}


@pytest.mark.parametrize("gpus, says", [("0,7", r"sees 4 GPU\(s\)"), ("1,1", "each at most once")])
def test_gpus_outside_what_torch_sees_is_refused(monkeypatch, gpus, says):
    from kernelwright.judge import DeviceUnavailable
    from kernelwright.judge.coordinator import pool as pool_module
    from kernelwright.scale.executor import check_executor

    monkeypatch.setattr(pool_module, "detect_backend", lambda device: ("cuda", 4))
    with pytest.raises(DeviceUnavailable, match=says):
        pool_module.JudgePool("cuda", gpus=check_executor("local", None, gpus))


@pytest.mark.parametrize("args, says", [(["--gpus", "a"], "a comma list of GPU indices"),
                                        (["--gpus", "0", "--executor", "ray"], "--gpus is for --executor local")])
def test_judge_suite_refuses_bad_gpus(runner, tmp_path, args, says):
    result = runner.invoke(app, ["judge-suite", "--suite", "builtin", "--candidates", "reference", "--device", "cpu",
                                 *args, "--out", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 2 and says in flat(result.output)


# -- generate and optimize on an executor (issue 33) ----------------------------------------------

AGENT_STARTS = {"generate": ["generate", "--task", "vector_add"],
                "optimize": ["optimize", str(GOOD), "--task", "vector_add", "--perf", "--force"]}


@pytest.mark.parametrize("command", sorted(AGENT_STARTS))
@pytest.mark.parametrize("args, says", [(["--executor", "slurm"], "unknown executor 'slurm'"),
                                        (["--address", "auto"], "--address is for --executor ray"),
                                        (["--gpus", "0", "--executor", "ray"], "--gpus is for --executor local"),
                                        (["--gpus", "a"], "a comma list of GPU indices"),
                                        (["--executor", "ray", "--address", "127.0.0.1:1"],
                                         "cannot reach the Ray cluster at 127.0.0.1:1"),
                                        (["--executor", "ray", "--address", "head-node"], "give host:port")])
def test_agent_commands_refuse_a_bad_executor(runner, captured, tmp_path, command, args, says):
    result = runner.invoke(app, [*AGENT_STARTS[command], *OFFLINE, *args, "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 2 and says in flat(result.output), result.output
    assert json.loads(result.stdout)["exit_code"] == 2
    assert not (tmp_path / "run").exists() and "agent" not in captured  # nothing started, nothing written


@pytest.fixture
def fake_cluster(monkeypatch):
    """A Ray cluster of three judging actors on the CPU, as the agent commands see it (no Ray is
    started): what they connect to is recorded."""
    from kernelwright.scale import raypool

    joined = []
    monkeypatch.setattr(raypool, "connect", lambda address: joined.append(address))
    monkeypatch.setattr(raypool, "cluster_slots", lambda: 3)
    monkeypatch.setattr(raypool, "cluster_backend", lambda address=None, slots=None: joined.append(address) or "cpu")
    return joined


@pytest.mark.parametrize("command", sorted(AGENT_STARTS))
def test_agent_commands_on_ray_keep_4_task_runs_per_actor_in_flight(runner, captured, fake_cluster, tmp_path,
                                                                    command):
    """As bench: the cluster's judging actors set the task-runs in flight (4 each), so --runs
    spread over its GPUs; --concurrency still decides when given. Locally: every run."""
    base = [*AGENT_STARTS[command], *OFFLINE, "--runs", "20"]
    result = runner.invoke(app, [*base, "--executor", "ray", "--address", "head:6379", "--out", str(tmp_path / "a")])
    stopped(result)
    assert captured["agent"]["concurrency"] == 12 and captured["agent"]["opts"].executor == "ray"
    assert set(fake_cluster) == {"head:6379"}
    result = runner.invoke(app, [*base, "--executor", "ray", "--concurrency", "5", "--out", str(tmp_path / "b")])
    stopped(result)
    assert captured["agent"]["concurrency"] == 5
    result = runner.invoke(app, [*base, "--out", str(tmp_path / "c")])
    stopped(result)
    assert captured["agent"]["concurrency"] is None  # (run_session: every task-run)


def test_bench_on_ray_keeps_4_task_runs_per_actor_in_flight(runner, captured, fake_cluster, tmp_path):
    result = runner.invoke(app, ["bench", "--suite", "builtin", *OFFLINE, "--tasks", "vector_add", "--executor", "ray",
                                 "--out", str(tmp_path / "run")])
    stopped(result)
    assert captured["agent"]["concurrency"] == 12


def test_a_run_started_locally_resumes_on_ray(runner, captured, fake_cluster, tmp_path, monkeypatch):
    """The executor is the machine's, not the run's: a resume takes --executor, --address and
    --gpus whatever the run was started with."""
    from kernelwright.judge.coordinator import backend

    # a host with one GPU for the local start's --gpus 0 (checked before the run exists)
    monkeypatch.setattr(backend, "detect_backend", lambda device="auto": ("cuda", 1))
    run = tmp_path / "run"
    stopped(runner.invoke(app, [*AGENT_STARTS["generate"], *OFFLINE, "--gpus", "0", "--out", str(run)]))
    result = runner.invoke(app, ["generate", "--resume", str(run), "--offline", "--executor", "ray",
                                 "--address", "head:6379"])
    stopped(result)
    assert captured["agent"]["opts"].executor == "ray" and captured["agent"]["concurrency"] == 12


@pytest.mark.parametrize("command", [
    ["judge-suite", "--suite", "builtin", "--candidates", "reference", "--device", "cpu"],
    ["bench", "--suite", "builtin", *OFFLINE],
    ["tasks"],
])
def test_a_mistyped_task_is_refused_before_any_task_loads(runner, captured, tmp_path, monkeypatch, command):
    """The suite's file names are enough to refuse a --tasks typo: nothing is loaded first (a
    checkout suite takes 5-30 s to load), and the error still suggests the close names."""
    def no_loading(*args, **kwargs):
        raise AssertionError("a task was loaded before --tasks was checked")

    for target in ("kernelwright.tasks.load_task_file", "kernelwright.tasks.registry.load_task_file",
                   "kernelwright.suites.runner.load_suite_tasks", "kernelwright.suites.runner.list_builtin_tasks"):
        monkeypatch.setattr(target, no_loading)
    monkeypatch.setattr("kernelwright.judge.JudgePool", no_loading)  # nor a judge pool started
    out = [] if command[0] == "tasks" else ["--out", str(tmp_path / "out")]
    result = runner.invoke(app, [*command, "--tasks", "sofmax", *out])
    assert result.exit_code == 2, result.output
    assert "unknown task(s) in --tasks: 'sofmax' (did you mean softmax" in flat(result.stderr)
    assert "agent" not in captured and not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", sorted(AGENT_STARTS))
def test_gpus_on_a_machine_without_one_is_refused_before_the_run_exists(runner, captured, tmp_path, command,
                                                                        monkeypatch):
    """The corrected command (without --gpus) can then use the same --out."""
    from kernelwright.judge.coordinator import backend

    monkeypatch.setattr(backend, "detect_backend", lambda device="auto": ("cpu", 1))
    result = runner.invoke(app, [*AGENT_STARTS[command], *OFFLINE, "--gpus", "0", "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 2 and "drop --gpus" in flat(result.output), result.output
    assert not (tmp_path / "run").exists() and "agent" not in captured
