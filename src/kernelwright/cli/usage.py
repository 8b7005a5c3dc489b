"""What every command shares about failing: usage errors (exit status 2) that also print a JSON
object on stdout when the command was asked for `--json`, and the entry point that does the same
for the errors click finds before a command runs (an unknown flag, a bad value).

Exit status, for every command: 0 success, 1 a check or a stage failed, 2 usage error (the user
must change the command or a file), 3 the judge could not decide (`eval`), 130 interrupted, 141
stdout's reader closed the pipe early (`| head`: the output was cut short, quietly).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn, Sequence

import typer

try:  # recent typer vendors click; its exceptions and contexts are those of typer._click
    from typer._click.exceptions import ClickException
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover - typer on top of the click package
    from click import ClickException, get_current_context
from rich.console import Console
from rich.markup import escape

from ..agent.run_metrics import clip  # noqa: F401 - one definition, for the CLI's messages too

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_JUDGE_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

err_console = Console(stderr=True)


def wants_json(args: Sequence[str] | None = None) -> bool:
    """Was the running command given `--json`? (From its parsed parameters, else from argv.)"""
    if args is None:
        ctx = get_current_context(silent=True)
        if ctx is not None and "as_json" in ctx.params:
            return bool(ctx.params["as_json"])
        args = sys.argv[1:]
    return "--json" in args


def print_json_error(message: str, code: int, **extra: Any) -> None:
    print(json.dumps({"error": message, "exit_code": code, **extra}, indent=2))


def usage_error(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print the message (stderr; with --json also `{"error", "exit_code"}` on stdout) and return
    the `typer.Exit` to raise."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    if wants_json():
        print_json_error(message, code)
    return typer.Exit(code)


def candidate_problem(path: Path) -> str | None:
    """Why `path` cannot be a candidate file, naming it (None: it is a file). Read problems
    (binary, too large) are the static stage's: `read_candidate` for a file read here."""
    if path.is_dir():
        return f"{path} is a directory; expected a .py file"
    if not path.exists():
        return f"candidate file {str(path)!r} does not exist"
    if not path.is_file():
        return f"{path} is not a regular file; expected a .py file"
    return None


def read_candidate(path: Path) -> str:
    """The text of a candidate file read by the trusted process (optimize's starting kernel):
    the static stage's reading (`static.read_source`), its problems as a ValueError naming the
    file, as `eval` reports them."""
    from ..judge.coordinator.static import read_source

    problem = candidate_problem(path)
    if problem is None:
        source, failed = read_source(path)
        problem = None if failed is None else f"{path}: {failed.reason}"
    if problem is not None:
        raise ValueError(problem)
    return source


def hide_flag_types() -> None:
    """typer >= 0.20 prints a type column for every option, and for flags (`--json`, `--help`,
    `--perf/--no-perf`) that is a stray `<bool>`: a flag takes no value. Show nothing there."""
    try:
        from typer.core import TyperOption
    except ImportError:  # pragma: no cover - another typer layout: nothing to hide
        return
    original = getattr(TyperOption, "display_type_rich", None)
    if original is None or getattr(original, "_kernelwright_flags_hidden", False):
        return

    def display_type_rich(self, ctx):
        if getattr(self, "is_flag", False) and not getattr(self, "count", False):
            return None
        return original(self, ctx)

    display_type_rich._kernelwright_flags_hidden = True
    TyperOption.display_type_rich = display_type_rich


def keep_words_whole() -> None:
    """Help text is wrapped by click's TextWrapper, which breaks words at hyphens: at 80 columns
    `kernelwright-runs/<task>` came out as `kernelwright-` / `runs/<task>` and a flag as
    `--no-` / `cache`. Wrap at spaces only (a word longer than a line is still split)."""
    try:
        from typer._click import _textwrap
    except ImportError:  # pragma: no cover - typer on top of the click package
        try:
            from click import _textwrap
        except ImportError:
            return
    original = _textwrap.TextWrapper
    if getattr(original, "_kernelwright_whole_words", False):
        return

    class TextWrapper(original):  # type: ignore[misc, valid-type]
        _kernelwright_whole_words = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("break_on_hyphens", False)
            super().__init__(*args, **kwargs)

    _textwrap.TextWrapper = TextWrapper


# A reader that closed our stdout early (`kernelwright bench-report RUN | head -1`): the status
# a command killed by SIGPIPE has in the shell (128 + 13), what `cat`, `grep` or `git log` give
# in the same pipe. Not 0: the output was cut short, which a script with `set -o pipefail` must
# be able to see; not 1: 1 is kernelwright's "a check or a stage failed". (SIGPIPE itself is not
# restored to its default: the judge talks to its workers through pipes, and a worker that dies
# must be an error the judge reports, not a signal that silently kills the command.)
EXIT_CLOSED_PIPE = 141


def _closed_pipe() -> NoReturn:
    """Exit quietly when stdout's reader is gone: what is left unwritten goes to /dev/null (so
    the interpreter's last flush at exit cannot fail with a second BrokenPipeError)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (captured): nothing to redirect
        pass
    sys.exit(EXIT_CLOSED_PIPE)


def _stdout_file() -> tuple[int, int] | None:
    """What file descriptor 1 is (device, inode); None where it cannot be told."""
    try:
        st = os.fstat(sys.__stdout__.fileno())
    except (OSError, ValueError, AttributeError):
        return None
    return st.st_dev, st.st_ino


def _pipe_was_closed(stdout: Any, fd1: tuple[int, int] | None) -> bool:
    """Did a library answer a broken stdout pipe with its own exit status 1? click (typer) wraps
    stdout in its PacifyFlushWrapper and exits 1; rich's Console.on_broken_pipe points fd 1 at
    /dev/null and exits 1. Either sign tells a closed pipe from the command's own status 1."""
    if sys.stdout is not stdout and type(sys.stdout).__name__.endswith("PacifyFlushWrapper"):
        return True
    now = _stdout_file()
    try:
        st = os.stat(os.devnull)
    except OSError:
        return False
    return now is not None and now != fd1 and now == (st.st_dev, st.st_ino)


def run(app: typer.Typer, args: Sequence[str] | None = None) -> None:
    """Run the CLI. With `--json`, a usage error found before the command runs (unknown flag,
    bad value, missing option) prints `{"error", "exit_code"}` on stdout too, so a script that
    parses stdout always gets an object. Output to a closed pipe ends the command quietly with
    EXIT_CLOSED_PIPE, for every command."""
    stdout, fd1 = sys.stdout, _stdout_file()
    try:
        _run(app, args)
        sys.stdout.flush()  # the last of the output, while a broken pipe can still be answered
    except BrokenPipeError:
        _closed_pipe()
    except SystemExit as exc:
        if exc.code not in (0, None) and _pipe_was_closed(stdout, fd1):
            _closed_pipe()
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _closed_pipe()
        raise


def _run(app: typer.Typer, args: Sequence[str] | None) -> None:
    args = list(sys.argv[1:] if args is None else args)
    if not wants_json(args):
        app(args=args, prog_name="kernelwright")
        return
    try:
        code = app(args=args, prog_name="kernelwright", standalone_mode=False)
    except ClickException as exc:
        try:
            from typer import rich_utils

            rich_utils.rich_format_error(exc)
        except Exception:  # pragma: no cover - older typer
            exc.show()
        print_json_error(exc.format_message(), exc.exit_code)
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)




def plural(count: int, word: str, many: str | None = None) -> str:
    """`count` and `word`, plural by the count: "1 attempt", "2 attempts", "0 attempts"."""
    return f"{count} {word if count == 1 else (many or word + 's')}"
