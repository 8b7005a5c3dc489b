"""A local editing model: answers the agent's prompts by editing the code they show, served over
the same OpenAI-compatible HTTP path as the scripted server (so the real SDK client is used).

It is no model of Triton; it is what a fair search comparison needs without a paid model: an
answerer whose every candidate is a plausible edit of kernels the prompt shows, deterministic per
(request seed, prompt), so `evolve`, `independent` and the tuning pass can be compared at equal
candidate budgets (benchmarks/evolve_vs_independent.py) and CI can test the mechanics.

    prompt (user message)                 answer
    ping                                  "ok"
    generate / fresh (## Task: NAME)      the task's seed kernel (`seeds`), for half the seeds with
                                          one launch-parameter variant; else prose (no code)
    reflect                               a short analysis
    fix (Your previous attempt)           the task's seed kernel again (a revert)
    optimize (independent: the fastest    one edit of the parent: a line taken from an inspiration
      kernel shown; evolve: the parent)   (a line that differs from the parent's only in its
                                          numbers), else a launch-parameter variant
                                          (launchknobs.py's `variants`, as the tuning
                                          pass makes them: num_warps, num_stages, block sizes)
    crossover (Combine the two kernels)   kernel A with each of B's differing lines taken at random
                                          (at least one)

`break_rate`: the share of code answers made to fail (an undefined name in the entry point), so
tests see failing kernels go through the reflector.

Run standalone: python -m kernelwright.llm.testing.editing_model --builtin-seeds --port N
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import time
from pathlib import Path
from typing import Mapping

from ...launchknobs import variants
from .scripted_server import Answer, RecordedRequest, Script, ScriptedServer

PING = "Reply with the single word: ok"
_PY_BLOCK = re.compile(r"```python\n(.*?)\n```", re.S)
_TASK = re.compile(r"^## Task: (\S+)", re.M)
BUILTIN_REFS = Path(__file__).resolve().parents[2] / "suites" / "builtin" / "triton_refs"


def builtin_seeds() -> dict[str, str]:
    """Task name -> the built-in suite's Triton reference, as the seed kernel of each task."""
    return {p.stem: p.read_text() for p in sorted(BUILTIN_REFS.glob("*.py"))}


def sections(prompt: str) -> dict[str, str]:
    """`## Heading` -> its text (up to the next `## ` heading)."""
    out: dict[str, str] = {}
    for part in re.split(r"^## ", prompt, flags=re.M)[1:]:
        head, _, body = part.partition("\n")
        out.setdefault(head.strip(), body)
    return out


def _section(prompt: str, starts: str) -> str:
    return next((body for head, body in sections(prompt).items() if head.startswith(starts)), "")


def _blocks(text: str) -> list[str]:
    return [m.group(1) + "\n" for m in _PY_BLOCK.finditer(text)]


def _key(line: str) -> str:
    return re.sub(r"\d+", "#", line.strip())


def borrowed_lines(parent: str, donor: str) -> list[tuple[int, str]]:
    """(line number in parent, donor's line) for each parent line the donor has with other numbers."""
    donor_lines: dict[str, str] = {}
    for line in donor.splitlines():
        if re.search(r"\d", line):
            donor_lines.setdefault(_key(line), line)
    out = []
    for i, line in enumerate(parent.splitlines()):
        other = donor_lines.get(_key(line))
        if other is not None and other.strip() != line.strip() and re.search(r"\d", line):
            indent = line[: len(line) - len(line.lstrip())]
            out.append((i, indent + other.strip()))
    return out


def _apply(code: str, edits: list[tuple[int, str]]) -> str:
    lines = code.splitlines()
    for i, new in edits:
        lines[i] = new
    return "\n".join(lines) + "\n"


class EditingModel:
    def __init__(self, seeds: Mapping[str, str] | None = None, break_rate: float = 0.0,
                 break_first: bool = False) -> None:
        self.seeds = dict(seeds or {})
        self.break_rate = break_rate
        # every first kernel broken: a test that needs a failing attempt (and the reflector) gets
        # one whatever the random draws, and the answers stay a pure function of the prompt
        self.break_first = break_first

    def answer(self, prompt: str, seed: int | None) -> str:
        """The answer to one request (its user message, its seed): a pure function of both."""
        rng = random.Random(hashlib.sha256(f"{seed}\n{prompt}".encode()).hexdigest())
        if prompt.strip() == PING:
            return "ok"
        if "Find the root cause" in prompt:
            return "The kernel fails the judge; go back to the last kernel known to work."
        task = _TASK.search(prompt)
        seed_code = self.seeds.get(task.group(1)) if task else None
        if "Combine the two kernels" in prompt:
            code, why = self._crossover(prompt, rng)
        elif "## The kernel to improve" in prompt or "## Correct kernels so far" in prompt:
            code, why = self._optimize(prompt, rng)
        elif seed_code is not None and "Your previous attempt" in prompt:
            code, why = seed_code, "revert to the seed kernel"
        elif seed_code is not None:  # a first kernel: the seed, or (half the runs) a variant of it
            code, why = self._first(seed_code, rng)
            if self.break_first:
                return f"## Strategy\n{why} (broken on purpose).\n\n```python\n{code.rstrip()}\n\nUNDEFINED_NAME_BREAKS_THE_IMPORT\n```\n"
        else:
            return "I have no kernel for this task."
        if code is None:
            code, why = seed_code, "nothing to edit: the seed kernel"
        if code is None:
            return "I have nothing to edit."
        if self.break_rate and rng.random() < self.break_rate:
            code, why = code + "\n\nUNDEFINED_NAME_BREAKS_THE_IMPORT\n", why + " (broken on purpose)"
        return f"## Strategy\n{why}.\n\n```python\n{code.rstrip()}\n```\n"

    @staticmethod
    def _first(seed_code: str, rng: random.Random) -> tuple[str, str]:
        options = variants(seed_code, 4) if rng.random() < 0.5 else []
        if not options:
            return seed_code, "the seed kernel"
        pick = options[rng.randrange(len(options))]
        return pick.code, f"the seed kernel with {pick.description}"

    def _optimize(self, prompt: str, rng: random.Random) -> tuple[str | None, str]:
        evolve = "## The kernel to improve" in prompt
        shown = _blocks(_section(prompt, "The kernel to improve" if evolve else "Correct kernels so far"))
        if not shown:
            return None, ""
        parent = shown[0] if evolve else shown[-1]  # independent: the fastest is shown last
        donors = _blocks(_section(prompt, "Inspirations")) if evolve else shown[:-1]
        borrow = [(d, e) for d in donors for e in borrowed_lines(parent, d)]
        if borrow and rng.random() < 0.5:
            _, edit = borrow[rng.randrange(len(borrow))]
            return _apply(parent, [edit]), f"take `{edit[1].strip()}` from another kernel"
        options = variants(parent, 12)
        if not options:
            return parent, "no launch parameter to change: the same kernel"
        pick = options[min(int(rng.expovariate(0.5)), len(options) - 1)]  # nearest values more often
        return pick.code, f"launch parameters: {pick.description}"

    def _crossover(self, prompt: str, rng: random.Random) -> tuple[str | None, str]:
        shown = _blocks(_section(prompt, "Two correct kernels"))
        if len(shown) < 2:
            return None, ""
        a, b = shown[0], shown[1]
        edits = borrowed_lines(a, b)
        if not edits:
            return a, "the kernels differ only in structure: kernel A"
        taken = [e for e in edits if rng.random() < 0.5] or [edits[rng.randrange(len(edits))]]
        return _apply(a, taken), "kernel A with " + "; ".join(f"`{e[1].strip()}`" for e in taken) + " from B"


class EditingServer(ScriptedServer):
    """`with EditingServer(seeds) as server:`, then `--base-url server.openai_base_url`; records
    every request like the scripted server."""

    def __init__(self, seeds: Mapping[str, str] | None = None, break_rate: float = 0.0,
                 host: str = "127.0.0.1", port: int = 0, delay_s: float = 0.0, break_first: bool = False) -> None:
        super().__init__(Script(), host, port)
        self.model = EditingModel(seeds, break_rate, break_first)
        self.delay_s = delay_s

    def _begin(self, request: RecordedRequest) -> Answer | None:
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        user = [m.get("content", "") for m in request.body.get("messages", []) if m.get("role") == "user"]
        text = self.model.answer(user[-1] if user and isinstance(user[-1], str) else request.prompt,
                                 request.body.get("seed"))
        return Answer(content=text, delay_s=self.delay_s,
                      usage={"input_tokens": max(1, len(request.prompt) // 4), "output_tokens": max(1, len(text) // 4)})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--builtin-seeds", action="store_true", help="seed kernels: the built-in suite's Triton refs")
    parser.add_argument("--break-rate", type=float, default=0.0)
    args = parser.parse_args(argv)
    with EditingServer(builtin_seeds() if args.builtin_seeds else {}, args.break_rate, port=args.port) as server:
        print(server.openai_base_url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
