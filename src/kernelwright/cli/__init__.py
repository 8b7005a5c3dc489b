"""The `kernelwright` command line. Each command group lives in its own module; this one only
assembles them. Commands parse arguments, call into the packages and print; nothing else."""

from __future__ import annotations

import typer

from .usage import hide_flag_types, keep_words_whole, run

hide_flag_types()
keep_words_whole()  # help at 80 columns: wrapped at spaces, never inside a word

app = typer.Typer(
    name="kernelwright",
    help="Write, judge and optimize Triton GPU kernels.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # click's help layout: option names whole at any width (rich's table cut them at 80)
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Command modules register themselves on `app` when imported.
from . import (
    agent_cmds,  # noqa: E402,F401
    bench_cmds,  # noqa: E402,F401
    judge_cmds,  # noqa: E402,F401
    llm_cmds,  # noqa: E402,F401
    profile_cmds,  # noqa: E402,F401
    report_cmds,  # noqa: E402,F401
    suite_cmds,  # noqa: E402,F401
)


def main() -> None:
    run(app)
