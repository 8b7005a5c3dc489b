"""`kernelwright config` (every setting, its value and where it came from) and
`kernelwright doctor` (device, Triton and model checks before a long run).

The option aliases below (`ModelOpt`, `BaseUrlOpt`, ...) are meant for every command that
talks to a model, so the flags are spelled the same everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..config import ConfigError
from ..llm.models import PROVIDERS
from ..llm.preflight import CheckResult, run_checks
from ..llm.settings import load_llm_settings
from . import app
from .options import Command, LLMConcurrencyOpt

ConfigOpt = Annotated[Optional[Path], typer.Option(
    "--config", help="settings file (default: $KERNELWRIGHT_CONFIG, then ./kernelwright.toml)")]
ModelOpt = Annotated[Optional[str], typer.Option(
    "--model", "-m", help="provider/model, e.g. openai/gpt-4.1, anthropic/claude-sonnet-4-5, "
                          "openai-compatible/Qwen2.5-Coder-32B")]
BaseUrlOpt = Annotated[Optional[str], typer.Option(
    "--base-url", help="endpoint of an OpenAI-compatible server, e.g. http://localhost:8000/v1")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="neither read nor write the response cache")]
OfflineOpt = Annotated[bool, typer.Option("--offline", help="answer only from the response cache (exact replay)")]
TimeoutOpt = Annotated[Optional[float], typer.Option("--timeout", help="seconds to wait for one response")]



def _console() -> Console:
    # Built per command, not at import, so it sees the terminal (and COLUMNS) of this run.
    return Console()


@app.command("config", cls=Command, short_help="Show every setting and where it came from.")
def config_command(
    config_path: ConfigOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    no_cache: NoCacheOpt = False,
    offline: OfflineOpt = False,
    timeout: TimeoutOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON: {key: {value, source}}")] = False,
    show_all: Annotated[bool, typer.Option(
        "--all", help="also list the default settings of providers not in use")] = False,
) -> None:
    """Show every setting, its value and where it came from (default < file < env < flag), and
    the environment variables the judge reads."""
    from ..config import env_knob_values, import_setting_modules

    import_setting_modules()
    try:
        config, _ = load_llm_settings(config_path, model=model, base_url=base_url,
                                      no_cache=no_cache, offline=offline, timeout_s=timeout,
                                      concurrency=llm_concurrency)
    except ConfigError as exc:
        _fail(str(exc), code=2)
    console = _console()
    merged = config.as_dict()
    knobs = env_knob_values()
    if as_json:
        typer.echo(json.dumps({**merged, **knobs}, indent=2, default=str))
        return
    table = Table(title=f"kernelwright settings (file: {config.file_path or 'none'})",
                  caption=None if show_all else "providers not in use: see --all")
    for column in ("setting", "value", "source"):
        table.add_column(column, overflow="fold")
    in_use = _provider_of(config.get("llm.model"))
    for key, entry in merged.items():
        if not (show_all or _worth_showing(key, entry["source"], in_use)):
            continue
        value = entry["value"]
        table.add_row(key, "" if value is None else str(value), entry["source"])
    console.print(table)
    env_table = Table(title="judge environment variables (not read from kernelwright.toml)")
    for column in ("variable", "value", "source", "meaning"):
        env_table.add_column(column, overflow="fold")
    for key, entry in knobs.items():
        env_table.add_row(key.removeprefix("env."), str(entry["value"]), entry["source"], entry["help"])
    console.print(env_table)


def _provider_of(model: str | None) -> str | None:
    return model.partition("/")[0] if model else None


def _worth_showing(key: str, source: str, provider_in_use: str | None) -> bool:
    """Nine providers times three settings drown the table: a provider's rows are shown when
    it is the chosen model's provider or one of them was set somewhere."""
    parts = key.split(".")
    if len(parts) != 3 or parts[1] not in PROVIDERS or parts[0] != "llm":
        return True
    return parts[1] == provider_in_use or source != "default"


@app.command("doctor", cls=Command, short_help="Check the device, Triton and the model.")
def doctor_command(
    config_path: ConfigOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    timeout: TimeoutOpt = None,
    device: Annotated[str, typer.Option(
        "--device", help="where kernels will be judged: auto (a GPU if there is one, else the CPU "
                         "interpreter) | cpu (Triton's interpreter) | cuda | hip")] = "auto",
    no_gpu: Annotated[bool, typer.Option(
        "--no-gpu", help="skip the device and Triton checks (only check the model)")] = False,
    suite: Annotated[Optional[str], typer.Option(
        "--suite", "-s", help="also check the optional modules this suite's tasks need (rocm: scipy)")] = None,
) -> None:
    """Check where kernels are judged (a GPU, or Triton's CPU interpreter), Triton, and (with
    --model, or a configured model) that the model is set up and answers; with --suite, the
    optional modules that suite's tasks need (without it, a missing one is noted). Every problem
    is reported at once, each with its fix.

    Exit status: 0 every check passed, 1 a check failed, 2 usage error.
    """
    from ..llm.preflight import DEVICES

    console = _console()
    if device not in DEVICES:
        _fail(f"--device must be one of {', '.join(DEVICES)}, got {device!r}", code=2)
    _check_suite_name(suite)
    try:
        _, settings = load_llm_settings(config_path, model=model, base_url=base_url, timeout_s=timeout)
    except ConfigError as exc:
        _fail(str(exc), code=2)
    chosen = model or settings.model
    if not chosen:
        console.print("[dim]no model given or configured: skipping the model check "
                      "(use --model provider/model)[/dim]")

    def show(result: CheckResult) -> None:
        mark = "[green]ok[/green]  " if result.ok else "[red]FAIL[/red]"
        console.print(f"{mark} {escape(result.name)}: {escape(result.detail)}", highlight=False, soft_wrap=True)

    results = run_checks(chosen, settings, gpu=not no_gpu, device=device, on_result=show, suite=suite)
    if suite is None and not no_gpu:
        _note_missing_extras(console)
    failed = [r for r in results if not r.ok]
    if failed:
        _fail(f"{len(failed)} of {len(results)} checks failed: {', '.join(r.name for r in failed)}", code=1)
    console.print(f"[green]all {len(results)} checks passed[/green]")


def _check_suite_name(suite: str | None) -> None:
    if suite is None:
        return
    from ..suites.runner import SUITES

    if suite not in SUITES:
        _fail(f"--suite must be one of {', '.join(SUITES)}, got {suite!r}", code=2)


def _note_missing_extras(console: Console) -> None:
    """Without --suite: the optional modules that are not installed, each with the suites whose
    tasks need it (a note, not a failed check: only those suites need it)."""
    from ..suites.extras import EXTRA_MODULES, suite_extras

    for name, module, why, installed in suite_extras():
        if not installed:
            console.print(f"[dim]note: {escape(module)} is not installed, and {escape(why)}: "
                          f"{escape(EXTRA_MODULES[module])}; `kernelwright doctor --suite {name}` checks it[/dim]",
                          highlight=False, soft_wrap=True)


def _fail(message: str, *, code: int) -> None:
    from .usage import print_json_error, wants_json

    _console().print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    if wants_json():
        print_json_error(message, code)
    raise typer.Exit(code)
