"""Issue 29 item 4: every complete example in README.md and docs/*.md works as written.

An example meant to be complete is marked by an HTML comment on the line before its fenced block,
`<!-- example: KIND FILENAME -->` (invisible once rendered), and is run as its kind says:

- `task`: a task file. Written to FILENAME (with the built-in Triton reference it names), loaded
  as `kernelwright tasks show` loads it (validation, the hostile-case and degeneracy checks), and
  its Triton reference judged against it by `kernelwright eval` on the CPU;
- `config`: a kernelwright.toml. `kernelwright config --config FILENAME` accepts it, and every
  setting in it is in force, from the file;
- `script`: a scripted-server script (JSON), loaded by the server's own reader.

Unmarked blocks are snippets, parts of a file. So that a complete example cannot lose its mark
unnoticed, a block that looks like one (a task file's definitions, TOML, a script's "sequence")
must be marked, and the pages must still have the examples they have now."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernelwright.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BUILTIN = ROOT / "src" / "kernelwright" / "suites" / "builtin"
FENCE = re.compile(r"^(?P<fence>`{3,})(?P<lang>[\w-]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S)
MARK = re.compile(r"<!-- example: (?P<kind>\w+) (?P<name>[\w.-]+) -->\n$")
KINDS = ("task", "config", "script")


def blocks():
    """(page, line, lang, body, mark or None) for every fenced block of the pages."""
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            before = text[:match.start()].rsplit("\n", 2)[-2:]
            mark = MARK.search("\n".join(before))
            yield page, line, match["lang"], match["body"], mark


def examples(kind: str):
    return [pytest.param(body, mark["name"], id=f"{page.name}:{line}")
            for page, line, _, body, mark in blocks() if mark and mark["kind"] == kind]


def looks_complete(lang: str, body: str) -> bool:
    if lang == "toml":
        return True
    if lang == "python":
        return all(re.search(rf"^{name}\b", body, re.M) for name in ("entry_point", "visible_cases", "def reference"))
    return lang == "json" and '"sequence"' in body


def test_complete_looking_blocks_are_marked_and_marks_are_known():
    unmarked = [f"{page.name}:{line}" for page, line, lang, body, mark in blocks()
                if mark is None and looks_complete(lang, body)]
    assert not unmarked, f"mark these complete examples with <!-- example: KIND FILE --> (or cut them down): {unmarked}"
    unknown = [f"{page.name}:{line} {mark['kind']}" for page, line, _, _, mark in blocks()
               if mark and mark["kind"] not in KINDS]
    assert not unknown, unknown


def test_the_pages_keep_their_examples():
    found = {kind: len(examples(kind)) for kind in KINDS}
    assert found["task"] >= 1 and found["config"] >= 3 and found["script"] >= 1, found


TRITON_REF = re.compile(r'^#?\s*triton_reference\s*=\s*"([^"]+)"', re.M)  # (commented out: a path of its own)


def _write_task(body: str, name: str, folder: Path) -> Path:
    path = folder / name
    path.write_text(body)
    return path


@pytest.mark.parametrize("body,name", examples("task"))
def test_task_examples_load(runner, tmp_path, body, name):
    """As the page says: the file loads as it is, wherever it is copied (nothing else beside it)."""
    for folder in (tmp_path, tmp_path / "copied" / "elsewhere"):
        folder.mkdir(parents=True, exist_ok=True)
        path = _write_task(body, name, folder)
        result = runner.invoke(app, ["tasks", "show", str(path), "--json"])
        assert result.exit_code == 0, result.output
        shown = json.loads(result.stdout)
        assert shown["name"] == path.stem and shown["cases"]["hidden"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("body,name", examples("task"))
def test_task_examples_pass_their_own_triton_reference(runner, tmp_path, body, name):
    """The Triton reference the example names (by the path a task in the built-in suite has it
    at) passes the example."""
    path = _write_task(body, name, tmp_path)
    ref = TRITON_REF.search(body)
    if ref is None:
        pytest.skip("no Triton reference to judge")
    result = runner.invoke(app, ["eval", str(BUILTIN / ref.group(1)), "--task", str(path), "--device", "cpu",
                                 "--judge-seeds", "1"])
    assert result.exit_code == 0, result.output


def _leaves(table: dict, prefix: str = ""):
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _leaves(value, path + ".")
        else:
            yield path, value


@pytest.mark.parametrize("body,name", examples("config"))
def test_config_examples_are_accepted_and_in_force(runner, tmp_path, monkeypatch, body, name):
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    for var in ("KERNELWRIGHT_MODEL", "KERNELWRIGHT_GPU", "KERNELWRIGHT_CONFIG"):
        monkeypatch.delenv(var, raising=False)  # the file's values, not the environment's
    path = tmp_path / name
    path.write_text(body)
    result = runner.invoke(app, ["config", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    for key, value in _leaves(tomllib.loads(body)):
        # a table of free keys (llm.prices."provider/model") is shown as one setting
        setting = next((k for k in shown if key == k or key.startswith(k + ".")), None)
        assert setting is not None, f"{key} is not a setting"
        assert shown[setting]["source"] == f"file ({path})", (key, shown[setting])
        if setting == key and not key.endswith("api_key") and not key.endswith("_dir"):  # keys masked, dirs expanded
            assert shown[key]["value"] == value, (key, shown[key])


@pytest.mark.parametrize("body,name", examples("script"))
def test_script_examples_load(tmp_path, body, name):
    from kernelwright.llm.testing.scripted_server import Script

    path = tmp_path / name
    path.write_text(body)
    script = Script.load(path)
    assert script.sequence or script.rules or script.default
