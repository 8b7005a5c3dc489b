"""The README's quick-start, run as written in a fresh virtual environment, on the CPU.

What "fresh" means here, and why. Installing PyTorch and Triton from scratch in a test would take
minutes and gigabytes (and a network), so the new environment reuses the already-installed
distributions, but only those that kernelwright declares: the test reads the dependencies from
this checkout's pyproject.toml, follows each one's own requirements through the installed
metadata, and links exactly those distributions (packages and their .dist-info) into one folder
that a .pth file puts on the new environment's path. Nothing else of the outer environment is
visible: not its kernelwright, not the packages that happen to be installed next to it (the test
checks that the LLM SDKs, an extra, cannot be imported there). So a quick-start command that needs
an undeclared package at run time (as GEAK's ROCm files needed pytest) fails here, and so does a
declared dependency that is not installed. `--system-site-packages`
would show every outer package and prove nothing of the kind.

kernelwright itself is installed from the checkout with the README's own command, plus
`--no-deps` (the dependencies are the linked ones) and `--no-build-isolation` (no download of
setuptools; the linked setuptools, a torch dependency, builds it). The README's other commands
then run literally, from the README's first code blocks (parsed, so that a README edit that
breaks them fails here), with the new environment's `bin` first on PATH, on the CPU
(`CUDA_VISIBLE_DEVICES=""`). The test command, `pytest -m "not gpu" -n auto --dist loadfile`, is run
with `--collect-only`: running it in full is what CI does anyway (`.ci/run` runs the same command,
checked here), and would nest the whole suite inside itself; collecting checks that the test
environment the README describes (`pip install -e ".[dev]"`, whose extra's dependencies are linked
for that step) imports every test module. The CPU-torch command of the set-up paragraph is the one command not run: its
torch is the linked one.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A venv, an install and the README's commands, each with its own limit of up to 300 s: more than
# the suite's default per-test timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def readme_quickstart() -> list[list[str]]:
    """The commands of the code blocks the README starts with (after its title, before any
    prose), without their comments."""
    rest = (ROOT / "README.md").read_text().split("\n", 1)[1]
    blocks = []
    while (match := re.match(r"\s*```bash\n(.*?)```", rest, re.S)):
        lines = (re.sub(r"(^|\s+)#\s.*$", "", line).strip() for line in match.group(1).splitlines())
        blocks.append([line for line in lines if line])
        rest = rest[match.end():]
    return blocks


def _requirement(text: str):
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover - pip always vendors it
        from pip._vendor.packaging.requirements import Requirement
    return Requirement(text)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions(requirements: list[str], extras: set[str]) -> dict[str, metadata.Distribution]:
    """The installed distributions that `requirements` (with `extras`) need, transitively."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(text, extras) for text in requirements]
    missing = []
    while todo:
        text, wanted = todo.pop()
        req = _requirement(text)
        env_extras = wanted or {""}
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in env_extras):
            continue
        name = _canonical(req.name)
        if name == "kernelwright":  # kernelwright[agent] and the like: its own extras
            project = _pyproject()
            for extra in req.extras:
                todo += [(t, set()) for t in project["optional-dependencies"].get(extra, [])]
            continue
        if name in found:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            missing.append(text)
            continue
        if dist.version not in req.specifier and req.specifier:
            missing.append(f"{text} (installed: {dist.version})")
            continue
        found[name] = dist
        todo += [(t, set(req.extras)) for t in (dist.requires or [])]
    assert not missing, f"declared but not installed here: {missing}"
    return found


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def link_distributions(dists: dict[str, metadata.Distribution], into: Path, bin_dir: Path, python: Path) -> None:
    """Symlink every top-level file and folder of each distribution (as its RECORD lists it, with
    its .dist-info, which pip reads as "installed"), and write its console scripts into `bin_dir`
    for `python`, as pip would."""
    into.mkdir(parents=True, exist_ok=True)
    for dist in dists.values():
        base = Path(dist.locate_file(""))
        tops = {Path(str(f)).parts[0] for f in (dist.files or []) if not str(f).startswith("..")}
        for top in tops:
            source, target = base / top, into / top
            if source.exists() and not target.exists():
                target.symlink_to(source)
        for ep in dist.entry_points:
            script = bin_dir / ep.name
            if ep.group == "console_scripts" and not script.exists():
                module, _, attr = ep.value.partition(":")
                script.write_text(f"#!{python}\nimport sys\nfrom {module.strip()} import {attr.split('.')[0].strip()}\n"
                                  f"sys.exit({attr.strip()}())\n")
                script.chmod(0o755)


def test_readme_quickstart_in_a_fresh_venv(tmp_path):
    blocks = readme_quickstart()
    assert len(blocks) >= 2, blocks
    first, tests = blocks[0], blocks[1]
    assert first[0].split()[:2] == ["pip", "install"] and first[0].split()[-2:] == ["-e", "."], first[0]
    install, run_commands = first[0], first[1:]
    assert run_commands and all(c.startswith("kernelwright ") for c in run_commands), run_commands
    assert len(tests) == 1 and tests[0].startswith('pytest -m "not gpu"'), tests
    assert f"python -m {tests[0]}" in (ROOT / ".ci" / "run").read_text(), "CI must run the README's test command"

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # Python < 3.12 seeds a venv with an old setuptools that cannot build without `wheel`: the
    # build uses the linked one (a torch dependency), as an isolated build would use a fresh one.
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "setuptools"], capture_output=True)
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    deps = tmp_path / "deps"
    project = _pyproject()
    link_distributions(declared_distributions(project["dependencies"], set()), deps, env_dir / "bin", python)
    (site / "zz-kernelwright-declared-deps.pth").write_text(str(deps) + "\n")  # after the venv's own packages

    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "KERNELWRIGHT"))}
    outer_bins = {str(Path(sys.prefix) / "bin"), str(Path(sys.executable).parent)}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p not in outer_bins]  # no outer scripts
    env.update(PATH=os.pathsep.join([str(env_dir / "bin"), *path]), VIRTUAL_ENV=str(env_dir),
               CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")

    def sh(command: str, timeout: float = 300) -> subprocess.CompletedProcess:
        proc = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
        assert proc.returncode == 0, f"README command failed ({proc.returncode}): {command}\n{proc.stdout[-3000:]}\n" \
                                     f"{proc.stderr[-3000:]}"
        return proc

    sh(install.replace("pip install", f"{shlex.quote(str(python))} -m pip install -q --no-deps --no-build-isolation", 1))
    where = sh("python -c 'import kernelwright, sys; print(kernelwright.__file__); print(sys.prefix)'").stdout.split()
    assert Path(where[0]).resolve().is_relative_to(ROOT / "src") and Path(where[1]) == env_dir, where
    assert Path(sh("command -v kernelwright").stdout.strip()).parent == env_dir / "bin"

    isolated = subprocess.run([str(python), "-c", "import openai"], env=env, capture_output=True)
    assert isolated.returncode != 0, "the fresh environment sees the outer environment's packages"

    for command in run_commands:
        sh(command)

    # The agent section: `pip install -e ".[llm]"`, then `generate` against a local
    # OpenAI-compatible server (the scripted one, answering with the built-in softmax kernel) and
    # `bench-report` on its run, as a new user following "Writing kernels with the agent" would.
    readme = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[llm]"' in readme and "kernelwright bench-report RUN_DIR" in readme
    link_distributions(declared_distributions(project["dependencies"] + project["optional-dependencies"]["llm"],
                                              set()), deps, env_dir / "bin", python)
    from kernelwright.llm.testing import ScriptedServer

    kernel = (ROOT / "src/kernelwright/suites/builtin/triton_refs/softmax.py").read_text()
    run = tmp_path / "run"
    with ScriptedServer({"default": {"content": f"```python\n{kernel}```"}}) as server:
        sh(f"kernelwright generate --task softmax --model openai-compatible/scripted --base-url "
           f"{server.openai_base_url} --iterations 2 --no-cache -o {shlex.quote(str(run))}")
        assert server.requests, "generate sent no request to the model"
    assert list((run / "best").rglob("*.py")), "no verified kernel in best/"
    report = sh(f"kernelwright bench-report {shlex.quote(str(run))}").stdout
    assert report.startswith("generate") and "| 1 | 1.000 (1/1) | 1.000 (1/1) |" in report, report[-2000:]

    # The test block: `pip install -e ".[dev]"` first, as its comment says; then collect.
    link_distributions(declared_distributions(project["dependencies"] + project["optional-dependencies"]["dev"],
                                              set()), deps, env_dir / "bin", python)
    collected = sh(tests[0] + " --collect-only -q -p no:cacheprovider", timeout=300)
    assert re.search(r"\d+ tests? collected", collected.stdout), collected.stdout[-2000:]
