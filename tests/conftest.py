import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = Path(__file__).resolve().parent / "candidates"
GEAK_EVAL = Path(os.environ.get("KERNELWRIGHT_GEAK_EVAL", ROOT.parent / "shared" / "benchmarks" / "GEAK-eval"))

_EXPECT = re.compile(r'#\s*expect:\s*(\w+)(?:\s+"([^"]*)")?')
# what the file gets where candidates are not confined (--sandbox off, or no Landlock), if other
_EXPECT_UNCONFINED = re.compile(r'#\s*expect-unconfined:\s*(\w+)(?:\s+"([^"]*)")?')


# Performance settings short enough for the CPU interpreter (the protocol is the same as on GPUs).
QUICK_PERF = dict(perf=True, perf_blocks=3, block_ms=3, warmup_ms=3, min_calls_per_block=2)


_cpu_pool = None  # judge_on_cpu's pool, while a test file uses it


def judge_on_cpu(task, path, **options):
    """Judge one candidate file with a one-worker interpreter pool and JudgeOptions(**options).
    The pool is shared by the calls of one test file (each sends its options with its request, as
    a suite run's candidates do), so its worker, a process that imports torch and triton (~2 s
    of CPU), starts once per file, not once per call; it closes after the file's last test."""
    from kernelwright.judge import JudgeOptions, JudgePool

    global _cpu_pool
    if _cpu_pool is None:
        _cpu_pool = JudgePool("cpu", workers=1)
    return _cpu_pool.judge(task, path, options=JudgeOptions(**options))


@pytest.fixture(scope="module", autouse=True)
def _close_judge_on_cpu_pool():
    yield
    global _cpu_pool
    pool, _cpu_pool = _cpu_pool, None
    if pool is not None:
        pool.close()


@pytest.fixture
def kernelwright_here(monkeypatch, capsys, tmp_path):
    """`kernelwright ARGS...` run in this process by `kernelwright.cli.usage.run`, which is what
    `python -m kernelwright` runs: the same parsing, command, output and exit status as in a
    subprocess, without a new interpreter that imports torch again before the command does its
    work (the command's judge pool still starts its own worker processes). In `cwd` (default: the
    test's tmp_path), without the KERNELWRIGHT_ settings of the environment. A test of what only
    a real process shows (a signal, SIGKILL and --resume) starts one instead. Returns a
    CompletedProcess (returncode, stdout, stderr)."""
    from kernelwright.cli import app
    from kernelwright.cli.usage import run

    def call(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        with monkeypatch.context() as m:
            for key in [k for k in os.environ if k.startswith("KERNELWRIGHT_")]:
                m.delenv(key)
            m.chdir(cwd or tmp_path)
            m.setattr(sys, "argv", ["kernelwright", *args])
            capsys.readouterr()
            try:
                run(app, list(args))
                code = 0
            except SystemExit as exc:
                code = 0 if exc.code is None else exc.code
            out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["kernelwright", *args], code, out, err)

    return call


def candidate_expectations(task: str, gpu: bool, confined: bool = True) -> list[tuple[Path, str, str]]:
    """(file, expected stage, expected reason substring) for every candidate of `task` that can
    run on this kind of machine (`# requires: gpu` marks files that need a real GPU). A file
    whose attack the sandbox stops says what it gets without one in `# expect-unconfined:`;
    `confined=False` lists only those files, with that expectation."""
    found = []
    for path in sorted((CANDIDATES / task).glob("*.py")):
        head = path.read_text().splitlines()[:4]
        match = next((m for m in map(_EXPECT.match, head) if m), None)
        assert match, f"{path} lacks an '# expect: STAGE \"reason\"' header"
        if any("requires: gpu" in line for line in head) and not gpu:
            continue
        if not confined:
            match = next((m for m in map(_EXPECT_UNCONFINED.match, head) if m), None)
            if match is None:
                continue
        found.append((path, match.group(1), match.group(2) or ""))
    return found


def pytest_collection_modifyitems(config, items):
    _order_files(items)
    has_gpu = False
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        pass
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA/ROCm GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# -- running in parallel: `pytest -n auto --dist loadfile` ----------------------------------------
# A file's tests run on one xdist worker, in order: its module- and session-scoped fixtures (often
# a whole judge pool's run) are computed once, not once per worker. (Not `--dist loadgroup`: with
# pytest 9.2, pytest-xdist 3.8 silently ignores xdist_group marks, pytest-xdist issue 1386.
# Not `--dist worksteal`: it splits a file between workers, and each would compute its fixtures.)
#
# The order files are handed out in. pytest-xdist starts the files with the most tests first
# (`--loadscope-reorder`, its default), which put the longest files of this suite (a few tests,
# each a whole command run) at the end of the run, with one worker left alone on them. So the
# files are ordered here, and pytest-xdist keeps that order (`pytest_configure` below):
# * first, the files with `serial` tests: a serial test waits for the test the other worker is
#   in to end, and at the start of the run those are short tests (serial files' own) instead of
#   a 40 s command run or a judge pool's module fixture;
# * then the rest, longest first (seconds, each file run alone on a 2-core machine, rounded; a
#   file not listed counts as short: under 5 s), so that the short files fill the end.
FILE_SECONDS = {
    "tests/report/test_report.py": 75,  # a bench run, reports, headless Chromium
    "tests/agent/test_agent_cli.py": 60,
    "tests/test_builtin_suite.py": 55,  # two reference-check processes: both cores
    "tests/agent/test_bench.py": 45,
    "tests/test_judge_suite.py": 35,
    "tests/agent/test_agent_e2e.py": 31,
    "tests/test_perf_stage.py": 30,
    "tests/test_judge_agent_api.py": 24,
    "tests/test_judge_candidates.py": 23,
    "tests/test_judge_memory.py": 23,
    "tests/test_hang_detection.py": 20,
    "tests/test_judge_provenance_and_replies.py": 16,
    "tests/test_quickstart.py": 13,
    "tests/test_pool_threads.py": 12,
    "tests/test_hostile_cases.py": 12,
    "tests/test_kernelbench_adapter.py": 12,
    "tests/test_derived_cases.py": 12,
    "tests/unit/test_first_run.py": 9,
    "tests/test_tritonbench_t_adapter.py": 8,
    "tests/llm/test_reliability.py": 7,
    "tests/test_geak_adapters.py": 7,
    "tests/test_judge_secrets.py": 6,
    "tests/test_perf_oom_retry.py": 5,
    "tests/unit/test_triton_hooks.py": 5,
}


def _order_files(items) -> None:
    """Serial files first, then the others longest first; a file's own tests keep their order."""
    serial = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("serial")}
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.nodeid.split("::")[0], i)

    def key(item):
        path = item.nodeid.split("::")[0]
        return (path not in serial, -FILE_SECONDS.get(path, 0), first_seen[path])

    items.sort(key=key)


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: hand files out in the order above
        config.option.loadscopereorder = False
    if hasattr(config, "workerinput"):
        # An xdist worker: `-n auto` runs one per core, so PyTorch's CPU threads (one per core by
        # default, in this process and in the processes its tests start: reference checks,
        # commands) would only contend with the other workers' (a hostile-case check took 19 s
        # beside them, 3 s alone). The judge's own processes set their thread counts themselves.
        os.environ.setdefault("OMP_NUM_THREADS", "1")


class _Turn:
    """This xdist worker's hold on the run's turn files (one pair for all workers of a run, in
    the run's shared temporary directory): every test holds `lock` shared, a `serial` test holds
    it exclusively, so it runs while no other worker runs a test. As in the judge's GPU lock, a
    taker passes `turnstile` first and a serial test keeps it while it waits, so other workers'
    next tests queue behind it instead of starving it; consecutive serial tests keep both."""

    def __init__(self, folder: Path) -> None:
        self.lock, self.turnstile = open(folder / "serial.lock", "a"), open(folder / "serial.turnstile", "a")
        self.held: str | None = None  # "shared" / "serial"

    def take(self, how: str) -> None:
        import fcntl

        if self.held == how == "serial":
            return
        self.release()
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        fcntl.flock(self.lock, fcntl.LOCK_EX if how == "serial" else fcntl.LOCK_SH)
        if how == "shared":
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        self.held = how

    def release(self) -> None:
        import fcntl

        if self.held is not None:
            fcntl.flock(self.lock, fcntl.LOCK_UN)
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
            self.held = None


_turn: _Turn | None = None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outside pytest-timeout's clock: waiting is no hang
def pytest_runtest_protocol(item, nextitem):
    """Under pytest-xdist, a test marked `serial` has the machine to itself (see `_Turn`)."""
    global _turn
    if not hasattr(item.config, "workerinput"):  # not an xdist worker: nothing runs beside it
        yield
        return
    if _turn is None:
        # the run's base temporary directory, shared by its workers (each has popen-gwN inside)
        _turn = _Turn(item.config._tmp_path_factory.getbasetemp().parent)
    _turn.take("serial" if item.get_closest_marker("serial") else "shared")
    try:
        yield
    finally:
        if nextitem is None or not (_turn.held == "serial" and nextitem.get_closest_marker("serial")):
            _turn.release()
