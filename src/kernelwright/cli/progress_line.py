"""One line of live progress that fits the terminal: its fields are kept by importance, not cut
from the right. rich's Progress squeezes every column to fit, and at 80 columns an agent run's line
became `att… no verified kernel yet · 12735 tok`, without its bar, count or time. Here each field
has a priority: the most important ones are placed first while they fit, the others are left out
whole; a bar and a trailing message are flexible and take what room is left.

    line = ProgressLine(console, lambda: [Field("3/10", 1), Field.bar(3, 10, 5), ...])
    with line:       # live while inside (a terminal only, unless `always`)
        ...          # the fields are read again at every refresh (4 a second)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.text import Text

BAR_WIDTH = (10, 40)  # a bar narrower than 10 columns says nothing; wider than 40 says no more


@dataclass(frozen=True)
class Field:
    """One field of the line: `priority` 1 is kept longest. `sep` goes before it unless it comes
    first. A field with `width` (min, max) is flexible: a message cut to fit with an ellipsis, or a
    bar (`done`/`total` set) drawn as wide as the room left allows."""

    text: str
    priority: int
    sep: str = " · "
    style: str = ""
    width: tuple[int, int] | None = None
    done: float | None = None
    total: float | None = None

    @classmethod
    def bar(cls, done: float, total: float | None, priority: int, sep: str = " ") -> "Field":
        return cls("", priority, sep, width=BAR_WIDTH, done=done, total=total or 0)

    def render(self, width: int) -> Text:
        if self.done is not None:  # the bar: done part, then the rest
            filled = round(width * min(1.0, self.done / self.total)) if self.total else 0
            return Text.assemble(("━" * filled, "bar.complete"), ("━" * (width - filled), "bar.back"))
        text = self.text if len(self.text) <= width else self.text[:max(0, width - 1)] + "…"
        return Text(text, style=self.style)


def fit(fields: Iterable[Field], width: int) -> Text:
    """The fields that fit in `width` columns, in their order: the most important first while
    they fit (a flexible one at its minimum), then the flexible ones grow into the room left, by
    priority, up to their maximum (a message: its whole text)."""
    fields = list(fields)
    kept: dict[int, int] = {}  # index -> columns given

    def columns(chosen: dict[int, int]) -> int:  # the fields and the separators between them
        order = sorted(chosen)
        return sum(chosen.values()) + sum(len(fields[i].sep) for i in order[1:])

    by_priority = sorted(range(len(fields)), key=lambda i: fields[i].priority)
    for i in by_priority:
        f = fields[i]
        need = len(f.text) if not f.width else f.width[0] if f.done is not None else min(f.width[0], len(f.text))
        if need and columns({**kept, i: need}) <= width:
            kept[i] = need
    for i in (i for i in by_priority if i in kept and fields[i].width):
        f = fields[i]
        most = f.width[1] if f.done is not None else min(f.width[1], len(f.text))
        kept[i] = max(kept[i], min(most, kept[i] + width - columns(kept)))
    line = Text()
    for n, i in enumerate(sorted(kept)):
        if n:
            line.append(fields[i].sep)
        line.append_text(fields[i].render(kept[i]))
    return line


class ProgressLine:
    """A live line that `fit`s the console's width at every refresh."""

    def __init__(self, console: Console, fields: Callable[[], list[Field]], enabled: bool = True) -> None:
        self.console = console
        self.fields = fields
        self._live = Live(self, console=console, refresh_per_second=4, transient=False) if enabled else None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield fit(self.fields(), options.max_width)

    def refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def __enter__(self) -> "ProgressLine":
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            if not self.console.is_terminal:  # the last frame, printed once, ends its line (a terminal's does)
                self.console.line()
