"""The measured ("full") profile of one side: its file run once more under a hardware profiler
(NVIDIA Nsight Compute `ncu`, AMD `rocprofv3`), in a process of its own, after the verdict is
decided. Never inside a timed block, never changing a verdict; bounded in time (60 s by default:
the whole process group is killed past it) and cached by the side's file, task, case, device and
profiler version.

Entry point: `full_profile(...) -> FULL | {"skipped": sentence}` (the FULL dict of
docs/profile.md, with a few extra fields: see `_full`). What the profiled process says about
itself (its own kernels' names, its launches per call, its inputs' and outputs' bytes) only picks
kernels out of the profiler's output; the numbers are the profiler's, which it writes into a
directory the profiled process cannot write (Landlock: it may write only its scratch), and
diagnoses are computed from them by the caller (`common.full_rules`).

Environment: the profiler (and so the profiled process) gets `env`, by default this process's
own: a judge worker is exec'd with the allow-listed environment (coordinator/workerenv), so no
secret of the user's reaches it; callers outside a worker pass `workerenv.worker_environment()`.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from ..common import procs
from ..common.profilers import NCU_METRICS, NCU_STALL_REGEX, ROCPROF_COUNTERS, parse_ncu_csv, parse_rocprof_csv, summarize

DEFAULT_TIMEOUT_S = 60.0
# Bumped when what is asked for or how it is read changes: old cache entries then miss.
SCHEMA = 1
NO_PROFILER = ("full profile: neither ncu nor rocprofv3 is installed (looked on PATH, in /usr/local/cuda/bin, "
               "$CUDA_HOME/bin, /opt/nvidia/nsight-compute and /opt/rocm/bin): only the basic profile was made")
_VERSIONS: dict[str, str] = {}
# What ncu is asked for; None: every metric of NCU_METRICS and the stall family. (The GPU acceptance
# script narrows it when this ncu rejects a name, to say which one.)
NCU_ASK: list[str] | None = None


@dataclass(frozen=True)
class Profiler:
    kind: str  # "ncu" or "rocprofv3"
    path: str

    @property
    def install_dirs(self) -> list[str]:
        """What the profiled process must be able to execute: the profiler's installation (its
        injected libraries are loaded from there when CUDA starts, after the process confined itself)."""
        real = os.path.realpath(self.path)
        dirs = [os.path.dirname(os.path.dirname(real)) if self.kind == "rocprofv3" else os.path.dirname(real)]
        dirs += [d for d in ("/opt/nvidia", "/opt/rocm") if os.path.isdir(d)]
        return [d for d in dirs if d and d != "/"]


def _candidates(kind: str, env: dict) -> list[str]:
    found = [shutil.which(kind, path=env.get("PATH", os.defpath))]
    if kind == "ncu":
        homes = ["/usr/local/cuda", env.get("CUDA_HOME"), env.get("CUDA_PATH")]
        found += [os.path.join(h, "bin", "ncu") for h in homes if h]
        found += sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)
    else:
        found += [os.path.join(h, "bin", "rocprofv3") for h in ("/opt/rocm", env.get("ROCM_PATH")) if h]
    return [p for p in found if p and os.path.isfile(p) and os.access(p, os.X_OK)]


def find_profiler(backend: str | None = None, env: dict | None = None) -> Profiler | None:
    """The profiler for this backend ("cuda": ncu, "hip": rocprofv3, None: either, ncu first)."""
    env = dict(os.environ if env is None else env)
    kinds = {"cuda": ["ncu"], "hip": ["rocprofv3"]}.get(backend or "", ["ncu", "rocprofv3"])
    for kind in kinds:
        paths = _candidates(kind, env)
        if paths:
            return Profiler(kind, paths[0])
    return None


def tool_version(tool: Profiler, timeout_s: float = 20.0) -> str:
    """"ncu 2025.3.1.0" (from `--version`), or the bare kind where it cannot be read."""
    if tool.path not in _VERSIONS:
        try:
            done = subprocess.run([tool.path, "--version"], capture_output=True, text=True, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL)
            match = re.search(r"(\d+\.\d+(?:\.\d+)*)", done.stdout + done.stderr)
            _VERSIONS[tool.path] = f"{tool.kind} {match.group(1)}" if match else tool.kind
        except (OSError, subprocess.SubprocessError):
            _VERSIONS[tool.path] = tool.kind
    return _VERSIONS[tool.path]


def cache_key(source: bytes, task_ref: str, case: int, device_name: str, version: str, role: str = "candidate") -> str:
    """sha256 of what the measurement depends on: the side's file, the task, the case, the device,
    the profiler's version (and this module's SCHEMA)."""
    h = hashlib.sha256()
    for part in (f"schema={SCHEMA}", task_ref, str(case), device_name, version, role):
        h.update(part.encode() + b"\0")
    h.update(hashlib.sha256(source).digest())
    return h.hexdigest()


def _cache_get(cache_dir: str | None, key: str) -> dict | None:
    if not cache_dir:
        return None
    try:
        with open(os.path.join(cache_dir, f"{key}.json")) as f:
            found = json.load(f)
        return found if isinstance(found, dict) and "kernels" in found else None
    except (OSError, ValueError):
        return None


def _cache_put(cache_dir: str | None, key: str, full: dict) -> None:
    if not cache_dir:
        return
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(full, f)
        os.replace(tmp, os.path.join(cache_dir, f"{key}.json"))  # readers never see half a file
    except OSError:
        pass


# The ports ncu's front end and the profiled process's injected agent talk on (`ncu --port`,
# `--max-connections`): the profiled process may bind and connect to TCP on these alone (Landlock).
# None: TCP stays open to it (where a kernel or ncu version needs other ports).
NCU_PORTS: tuple[int, int] | None = (49152, 64)


def _profiler_command(tool: Profiler, out_dir: str, inner: list[str]) -> list[str]:
    if tool.kind == "ncu":
        if NCU_PORTS is not None:
            inner = [*inner, "--tcp-ports", f"{NCU_PORTS[0]}:{NCU_PORTS[1]}"]
            ports = ["--port", str(NCU_PORTS[0]), "--max-connections", str(NCU_PORTS[1])]
        else:
            ports = []
        metrics = ",".join(NCU_ASK or [*NCU_METRICS.values(), NCU_STALL_REGEX])
        # --clock-control none: other workers may be timing on this GPU; ncu's default locks its clocks
        return [tool.path, "--profile-from-start", "off", "--target-processes", "all", "--clock-control", "none",
                "--csv", "--page", "raw", "--print-units", "base", "--log-file", os.path.join(out_dir, "ncu.csv"),
                *ports, "--metrics", metrics, *inner]
    return [tool.path, "--pmc", *ROCPROF_COUNTERS, "--output-format", "csv", "-d", out_dir, "-o", "profile",
            "--", *inner]


def _raw_output(tool: Profiler, out_dir: str) -> str | None:
    if tool.kind == "ncu":
        paths = [os.path.join(out_dir, "ncu.csv")]
    else:
        paths = sorted(glob.glob(os.path.join(out_dir, "**", "*counter_collection.csv"), recursive=True))
    texts = []
    for path in paths:
        try:
            with open(path, errors="replace") as f:
                texts.append(f.read())
        except OSError:
            pass
    return "\n".join(texts) if texts else None


def _run_group(cmd: list[str], env: dict, cwd: str, log_path: str, timeout_s: float) -> tuple[int | None, float]:
    """Run `cmd` in a process group of its own; (exit code or None on timeout, seconds). Past the
    timeout, the whole tree is stopped and killed (`procs.kill_tree`: nothing it started is left);
    after a normal exit, whatever it left behind in its group is killed too."""
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        code: int | None = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        procs.kill_tree(proc.pid)
        code = None
    procs.kill_group(proc.pid)
    proc.wait()
    return code, time.monotonic() - started


def _tail(path: str, limit: int = 600) -> str:
    try:
        with open(path, "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-4:])[-limit:]


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            found = json.load(f)
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}


def _package_root() -> str:
    """The directory holding the `kernelwright` package (PYTHONPATH of the profiled process)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _environment(env: dict, root: str, box: str) -> dict:
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH", "")) if p)
    # The profiler and the profiled process share a temporary directory (the injected library and
    # its frontend may meet there); the frontend's HOME (its settings) is out of the process's reach.
    env.update(TMPDIR=box, TEMP=box, TMP=box, HOME=os.path.join(root, "home"), LC_ALL="C",
               PYTHONUNBUFFERED="1")
    return env


def _full(tool_name: str, seconds: float, kernels: list[dict], report: dict, errors: list[str]) -> dict:
    """The FULL dict: the contract's fields, plus `io_bytes` (the profiled call's inputs and
    outputs, as the profiled process counted them: the candidate's word), `own_kernels`,
    `call_ms` (CUDA events around the profiled call, under the profiler) and `errors`."""
    known = [k for k in kernels if k["dram_read_bytes"] is not None or k["dram_write_bytes"] is not None]
    dram = sum((k["dram_read_bytes"] or 0) + (k["dram_write_bytes"] or 0) for k in known) if known else None
    return {"tool": tool_name, "seconds": round(seconds, 3), "dram_bytes": dram, "kernels": kernels,
            "io_bytes": report.get("io_bytes"), "own_kernels": report.get("own_kernels"),
            "call_ms": report.get("call_ms"), "sandbox": (report.get("sandbox") or {}).get("summary"),
            "errors": errors}


def _measure(tool: Profiler, version: str, inner: list[str], root: str, env: dict, timeout_s: float,
             raw_to: str | None) -> dict:
    out_dir, box = os.path.join(root, "out"), os.path.join(root, "box")
    code, seconds = _run_group(_profiler_command(tool, out_dir, inner), env, box, os.path.join(out_dir, "tool.log"),
                               timeout_s)
    if code is None:
        return {"skipped": f"full profile: {tool.kind} timed out after {timeout_s:g} s (the profiled process "
                           "and everything it started were stopped)"}
    raw = _raw_output(tool, out_dir)
    if raw is not None and raw_to:
        with open(raw_to, "w") as f:
            f.write(raw)
    report = _read_json(os.path.join(box, "result.json"))
    if not report.get("ok"):
        why = report.get("error") or _tail(os.path.join(box, "profile.log")) or _tail(os.path.join(out_dir, "tool.log"))
        return {"skipped": f"full profile: the profiled process failed under {tool.kind} (exit {code}): {why}"}
    if raw is None:
        return {"skipped": f"full profile: {tool.kind} wrote no output (exit {code}): "
                           f"{_tail(os.path.join(out_dir, 'tool.log'))}"}
    launches = parse_ncu_csv(raw) if tool.kind == "ncu" else parse_rocprof_csv(raw)
    own = set(report.get("own_kernels") or [])
    # rocprofv3 saw the warm call too: the profiled call's launches are the last ones
    last = int(report.get("launches_per_call") or 0) if tool.kind == "rocprofv3" else None
    kernels = summarize(launches, own, last) if own else []
    errors = []
    if not own:
        errors.append("no kernel defined in the side's own file ran in the profiled call")
    elif not kernels:
        errors.append(f"{tool.kind} measured none of the side's own kernels ({', '.join(sorted(own))}) "
                      f"among {len(launches)} launches")
    return _full(version, seconds, kernels, report, errors)


def full_profile(task_ref: str, file: str, case: int, seed: int, device_name: str, *, role: str = "candidate",
                 backend: str | None = None, cache_dir: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 sandbox: str = "auto", scope: bool = True, triton_cache: str | None = None,
                 read: tuple[str, ...] = (), env: dict | None = None, tool: Profiler | None = None,
                 raw_to: str | None = None, device: str = "cuda") -> dict:
    """The FULL dict of one side at one perf case (`case`: index into the task's perf cases,
    inputs from `seed`), or {"skipped": sentence}. `file`: the side's own file (a candidate, or
    the reference's Triton file); `device_name`: DeviceSpec.name (part of the cache key);
    `backend`: "cuda" or "hip" (which profiler); `cache_dir`: JSON results by `cache_key`;
    `sandbox`: the judge's level ("off" | "auto" | "strict"); `scope`: signal scoping of the
    profiled process; `triton_cache`: that side's Triton cache (writable to it); `read`: more
    paths it may read (the task's files); `raw_to`: a path to copy the profiler's raw output to."""
    if device != "cuda":
        return {"skipped": "no full profile under the interpreter (TRITON_INTERPRET=1): profiling needs a GPU"}
    tool = tool or find_profiler(backend, env)
    if tool is None:
        return {"skipped": NO_PROFILER}
    try:
        with open(file, "rb") as f:
            source = f.read()
    except OSError as exc:
        return {"skipped": f"full profile: cannot read {file}: {exc.strerror}"}
    version = tool_version(tool)
    key = cache_key(source, task_ref, case, device_name, version, role)
    cached = _cache_get(cache_dir, key)
    if cached is not None:
        return {**cached, "cached": True}
    root = tempfile.mkdtemp(prefix="kw-profile-")  # 0700: this user's alone
    try:
        for sub in ("out", "box", "home"):
            os.makedirs(os.path.join(root, sub), mode=0o700)
        box = os.path.join(root, "box")
        copy = os.path.join(box, "src", os.path.basename(file) or "candidate.py")
        os.makedirs(os.path.dirname(copy))
        with open(copy, "wb") as f:  # the bytes hashed are the bytes profiled
            f.write(source)
        inner = [sys.executable, "-m", "kernelwright.judge.sandbox.profile_main", "--task", task_ref, "--file", copy,
                 "--case", str(case), "--seed", str(seed), "--role", role, "--scratch", box,
                 "--result", os.path.join(box, "result.json"), "--sandbox", sandbox]
        inner += [a for d in tool.install_dirs for a in ("--exec", d)]
        inner += [a for d in read for a in ("--read", d)]
        if triton_cache:
            inner += ["--triton-cache", triton_cache, "--write", triton_cache]
        if not scope:
            inner.append("--no-scope")
        full = _measure(tool, version, inner, root, _environment(os.environ if env is None else env, root, box),
                        timeout_s, raw_to)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if "kernels" in full and full["kernels"]:
        _cache_put(cache_dir, key, full)
    return full
