"""The evolutionary archive of `--search evolve`: one per task, shared by the task's runs.

    run 0 (island) ──┐                               ┌── parent: best cell, or a less-explored one
    run 1 (island) ──┼─► passed attempts ─► cells ───┤
    run 2 (island) ──┘   (judge-verified,   (MAP-    └── inspirations: elites of other cells
                          measured speed)    Elites)
                 every `migrate_every` iterations: each island receives every other island's best

Nothing here is stored apart from the attempts: the archive is a pure function of the stored
attempts (`Archive.of`), so a resumed run rebuilds exactly the archive the killed run had, and
every choice (`choose`) is seeded by (seed, task, run, attempt index), so it is the same choice.

**Entries.** Only attempts the judge passed enter, with the speedup the judge measured and the
verdict's profile; nothing self-reported or unverified ever does.

**Cells** (`cell_of`): a cheap feature grid read from the code, so one lucky lineage fills one
cell and cannot take the whole archive:
- approach: `autotune` (an @triton.autotune decorator: the launch shape is picked at run time),
  else `dot` (tl.dot: a matmul-like tiling), else `loop` (a loop inside a @triton.jit function,
  e.g. over K or over a row in chunks), else `flat` (one block per program, no loop);
- block: the largest power-of-two literal bound to a block-like name (BLOCK, TILE, SIZE), in three
  buckets: `b<=128`, `b<=1024`, `b>1024` (`b?` when none is found);
- warps: `w<=4` (also when num_warps is not given: Triton's default is 4) or `w>4`.
Each cell's elite is its fastest entry.

**Islands and migration.** Each run is an island: it sees its own entries at once, and another
island's entries only by migration. Iterations are counted per run (the model's attempts); epoch
e holds iterations e*K+1 .. (e+1)*K, K = `migrate_every`. At each boundary b (after iteration b*K)
every island receives every other island's best entry among that island's epochs < b; migrants
accumulate. The session runs epochs in lockstep (`session.AgentSession.run`), so when an island
starts epoch e every other island has finished epoch e-1: what it receives does not depend on
timing.

**Selection** (`choose`), seeded: with probability EXPLOIT the parent is the fastest entry the
island sees; otherwise it is the elite of the least-explored cell (fewest entries; ties by the
seeded draw). Inspirations: the elites of up to 3 other cells (the two fastest, then a seeded
draw from the rest), filled up with the fastest other entries when fewer cells exist. With
probability CROSSOVER (and an inspiration to pair with) the attempt is a crossover of the parent
and the first inspiration instead of an optimization of the parent.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from .memory import Attempt, Mode

SEARCHES = ("independent", "evolve")
DEFAULT_MIGRATE_EVERY = 2   # iterations per epoch: a 4 x 8 run migrates three times
EXPLOIT = 0.6               # the parent is the fastest entry; else the least-explored cell's elite
CROSSOVER = 0.3             # a crossover prompt instead of an optimization, when it has a mate
MAX_INSPIRATIONS = 3

_AUTOTUNE = re.compile(r"@\s*triton\.autotune\b")
_DOT = re.compile(r"\btl\.dot\s*\(")
_JIT = re.compile(r"@\s*triton\.jit")
_LOOP = re.compile(r"^\s+for\s+\w+\s+in\s+(?:tl\.)?(?:static_)?range\s*\(", re.M)
_BLOCK = re.compile(r"""(?<![A-Za-z0-9_])['"]?([A-Z0-9_]*(?:BLOCK|TILE|SIZE)[A-Z0-9_]*)['"]?\s*[=:]\s*(\d+)\b""")
_WARPS = re.compile(r"""\bnum_warps['"]?\s*[=:]\s*(\d+)""")


@dataclass(frozen=True)
class Entry:
    """One judge-passed kernel of the archive."""

    run: int
    index: int
    code: str
    speedup: float | None
    cell: tuple[str, str, str]
    epoch: int                   # the run's epoch it was judged in (GIVEN: -1, visible everywhere)
    strategy: str = ""
    attempt: Attempt | None = None

    @property
    def key(self) -> str:
        return f"r{self.run}a{self.index}"

    @property
    def speed(self) -> float:
        """For ordering: an unmeasured speed is the slowest."""
        return self.speedup if self.speedup is not None and math.isfinite(self.speedup) else -1.0


def cell_of(code: str) -> tuple[str, str, str]:
    """The kernel's cell: (approach, block bucket, warps bucket); see the module's docstring."""
    if _AUTOTUNE.search(code):
        approach = "autotune"
    elif _DOT.search(code):
        approach = "dot"
    elif _JIT.search(code) and _jit_loop(code):
        approach = "loop"
    else:
        approach = "flat"
    blocks = [int(v) for _, v in _BLOCK.findall(code) if int(v) > 0 and int(v) & (int(v) - 1) == 0]
    top = max(blocks, default=0)
    block = "b?" if not top else "b<=128" if top <= 128 else "b<=1024" if top <= 1024 else "b>1024"
    warps = max((int(w) for w in _WARPS.findall(code)), default=4)
    return approach, block, "w<=4" if warps <= 4 else "w>4"


def _jit_loop(code: str) -> bool:
    """Whether a loop sits inside a @triton.jit function (a wrapper's loop is not the kernel's)."""
    lines = code.splitlines()
    for i, line in enumerate(lines):
        if not _JIT.match(line.strip()):
            continue
        body: list[str] = []
        for later in lines[i + 1:]:
            if later.strip() and not later[0].isspace() and body:
                break  # the next top-level statement: the kernel's body has ended
            body.append(later)
        if _LOOP.search("\n".join(body)):
            return True
    return False


def iteration_epochs(attempts: Sequence[Attempt], migrate_every: int) -> dict[int, int]:
    """attempt index -> its epoch: the model's iterations counted in order (1, 2, ...), epoch
    (iteration - 1) // migrate_every; the user's kernel -1; a tuning attempt the epoch after."""
    out, n = {}, 0
    for a in sorted(attempts, key=lambda a: a.index):
        if a.mode == Mode.GIVEN:
            out[a.index] = -1
        elif a.mode == Mode.TUNE:
            out[a.index] = n // migrate_every + 1  # after every iteration: it never migrates mid-run
        else:
            n += 1
            out[a.index] = (n - 1) // migrate_every
    return out


def epoch_of_next(attempts: Sequence[Attempt], migrate_every: int) -> int:
    """The epoch of a run's next iteration."""
    return sum(1 for a in attempts if a.mode.by_llm) // migrate_every


@dataclass(frozen=True)
class Archive:
    """Every passed attempt of one task's runs, with its cell and epoch."""

    entries: tuple[Entry, ...]
    migrate_every: int = DEFAULT_MIGRATE_EVERY

    @classmethod
    def of(cls, attempts: Iterable[Attempt], migrate_every: int = DEFAULT_MIGRATE_EVERY) -> "Archive":
        by_run: dict[int, list[Attempt]] = {}
        for a in attempts:
            by_run.setdefault(a.run, []).append(a)
        entries = []
        for run in sorted(by_run):
            epochs = iteration_epochs(by_run[run], migrate_every)
            for a in sorted(by_run[run], key=lambda a: a.index):
                if a.passed and a.code:  # the judge's verdict, nothing else, lets a kernel in
                    entries.append(Entry(run, a.index, a.code, a.speedup, cell_of(a.code), epochs[a.index],
                                         a.strategy, a))
        return cls(tuple(entries), migrate_every)

    def cells(self) -> dict[tuple[str, str, str], list[Entry]]:
        out: dict[tuple[str, str, str], list[Entry]] = {}
        for e in self.entries:
            out.setdefault(e.cell, []).append(e)
        return out

    def elites(self) -> dict[tuple[str, str, str], Entry]:
        """Each cell's fastest entry (the earliest of equals)."""
        return {cell: _best(es) for cell, es in self.cells().items()}

    def migrants(self, run: int, epoch: int) -> list[Entry]:
        """What island `run` has received by the start of its epoch `epoch`: at each boundary
        b = 1..epoch, every other island's best entry among its epochs < b."""
        out: dict[str, Entry] = {}
        others = sorted({e.run for e in self.entries} - {run})
        for b in range(1, epoch + 1):
            for s in others:
                pool = [e for e in self.entries if e.run == s and e.epoch < b]
                if pool:
                    best = _best(pool)
                    out.setdefault(best.key, best)
        return list(out.values())

    def view(self, run: int, epoch: int) -> "Archive":
        """The archive as island `run` sees it in epoch `epoch`: its own entries and its migrants."""
        own = [e for e in self.entries if e.run == run]
        return Archive(tuple(own + self.migrants(run, epoch)), self.migrate_every)


def _best(entries: Sequence[Entry]) -> Entry:
    return max(entries, key=lambda e: (e.speed, -e.run, -e.index))


@dataclass(frozen=True)
class Choice:
    mode: Mode                         # OPTIMIZE or CROSSOVER
    parent: Entry
    inspirations: tuple[Entry, ...]    # for a crossover, the first is the mate

    def origin(self) -> str:
        """What the attempt was built from, as stored with it (e.g. "parent r1a3; inspirations r0a2")."""
        text = f"{self.mode.value} of {self.parent.key}"
        return text + ("; inspirations " + ", ".join(e.key for e in self.inspirations) if self.inspirations else "")


def rng_for(seed: int, task: str, run: int, index: int) -> random.Random:
    """The draw of one attempt: the same on a resumed run (str seeds hash with SHA-512, not
    Python's per-process hash)."""
    return random.Random(f"evolve:{seed}:{task}:{run}:{index}")


def choose(view: Archive, rng: random.Random) -> Choice | None:
    """Parent, inspirations and mode for one attempt from an island's view; None when empty."""
    if not view.entries:
        return None
    cells = view.cells()
    elites = view.elites()
    if rng.random() < EXPLOIT:
        parent = _best(view.entries)
    else:
        fewest = min(len(es) for es in cells.values())
        sparse = sorted(cell for cell, es in cells.items() if len(es) == fewest)
        parent = elites[sparse[rng.randrange(len(sparse))]]
    inspirations = _inspirations(view, elites, parent, rng)
    mode = Mode.CROSSOVER if inspirations and rng.random() < CROSSOVER else Mode.OPTIMIZE
    return Choice(mode, parent, tuple(inspirations))


def _inspirations(view: Archive, elites: dict, parent: Entry, rng: random.Random) -> list[Entry]:
    other_cells = sorted((e for cell, e in elites.items() if cell != parent.cell),
                         key=lambda e: (-e.speed, e.run, e.index))
    chosen = other_cells[:2]
    rest = other_cells[2:]
    if rest:
        chosen.append(rest[rng.randrange(len(rest))])
    if len(chosen) < 2:  # few cells yet: the fastest other kernels, so other islands still show
        seen = {parent.key, *(e.key for e in chosen)}
        codes = {parent.code, *(e.code for e in chosen)}
        for e in sorted(view.entries, key=lambda e: (-e.speed, e.run, e.index)):
            if len(chosen) >= 2:
                break
            if e.key not in seen and e.code not in codes:
                chosen.append(e)
                seen.add(e.key)
                codes.add(e.code)
    return chosen[:MAX_INSPIRATIONS]
