"""Print, as markdown, the first prompt of each kind (generator first attempt, reflector,
generator fix, optimizer) that a recorded run sent, exactly as the model received it, read from
the run's store. docs/agent.md's examples come from this script.

    PYTHONPATH=src python benchmarks/render_agent_prompts.py RUN_DIR [--elide-instruction] > prompts.md
    PYTHONPATH=src python benchmarks/render_agent_prompts.py --evolve-examples

--elide-instruction replaces the task's instruction (the text under "## Task:") with a note of its
length: a benchmark's instructions are its data, which this repository does not copy.

--evolve-examples prints the two prompts of `--search evolve` (the optimizer's, with a parent and
inspirations from other cells of the archive, and the crossover's) rendered by the real templates
and `agent.optimizer.evolve_messages` from a small hand-made archive (`evolve_examples`): the
built-in vector_add task, three verified kernels over two runs, their speedups made up for the
example. docs/agent-prompts.md holds its output between the `evolve-examples` markers, and
tests/agent/test_archive.py checks that it is still what the templates render.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

TITLES = {"generate": "Generator, first attempt", "reflect": "Reflector", "fix": "Generator, fix",
          "optimize": "Optimizer"}


def fence(text: str) -> str:
    ticks = "````"
    while ticks in text:
        ticks += "`"
    return f"{ticks}text\n{text.rstrip()}\n{ticks}"


_INSTRUCTION = re.compile(r"(## Task: (\S+)\n)(.*?)(\n\n## Interface)", re.S)


def elide_instruction(text: str) -> str:
    def note(m: re.Match) -> str:
        return (f"{m.group(1)}[the benchmark's instruction for {m.group(2)}, {len(m.group(3))} characters, as the "
                f"task holds it; not reproduced here: `kernelwright tasks show {m.group(2)} --suite ...` prints it]"
                f"{m.group(4)}")
    return _INSTRUCTION.sub(note, text)


EVOLVE_BEGIN, EVOLVE_END = "<!-- evolve-examples: begin -->", "<!-- evolve-examples: end -->"


def _variant(seed: str, block: int, warps: int) -> str:
    return seed.replace("BLOCK = 4096", f"BLOCK = {block}").replace("num_warps=8", f"num_warps={warps}")


def _looped(seed: str) -> str:
    """The seed with each program adding four blocks in a loop (the archive's `loop` cell)."""
    body = ("    pid = tl.program_id(0)\n"
            "    for i in range(4):\n"
            "        offs = (pid.to(tl.int64) * 4 + i) * BLOCK + tl.arange(0, BLOCK)\n"
            "        mask = offs < n\n"
            "        x = tl.load(x_ptr + offs, mask=mask)\n"
            "        y = tl.load(y_ptr + offs, mask=mask)\n"
            "        tl.store(out_ptr + offs, x + y, mask=mask)\n")
    head, rest = seed.split("    pid = tl.program_id(0)\n", 1)
    tail = rest.split("    tl.store(out_ptr + offs, x + y, mask=mask)\n", 1)[1]
    return (head + body + tail).replace("BLOCK = 4096", "BLOCK = 1024").replace(
        "triton.cdiv(n, BLOCK)", "triton.cdiv(n, 4 * BLOCK)").replace("num_warps=8", "num_warps=4")


def evolve_examples() -> str:
    """The evolve optimizer's and the crossover's prompts, as markdown, from a hand-made archive:
    run 0 wrote a 1024-element kernel (1.00x) and a looped one (1.04x); run 1 a 4096-element
    kernel with 8 warps (1.12x), which reached run 0 by migration (--migrate-every 1). What run 0
    is asked for its next attempt is drawn as the loop draws it (`archive.choose`, seeded)."""
    from kernelwright.agent import optimizer
    from kernelwright.agent.archive import Archive, choose, epoch_of_next, rng_for
    from kernelwright.agent.brief import brief_for
    from kernelwright.agent.memory import Attempt, Mode
    from kernelwright.agent.prompts import PromptLibrary
    from kernelwright.llm.testing.editing_model import builtin_seeds
    from kernelwright.tasks.registry import resolve_task

    seed = builtin_seeds()["vector_add"]
    task = resolve_task("vector_add")
    made = [(0, 0, "generate", _variant(seed, 1024, 4), 1.00, "One program per block of 1024 elements."),
            (0, 1, "optimize", _looped(seed), 1.04, "Each program adds four blocks in a loop."),
            (1, 0, "generate", _variant(seed, 4096, 8), 1.12, "Blocks of 4096 elements, 8 warps.")]
    attempts = [Attempt("vector_add", run, index, mode, 0, None if index == 0 else 0, code, strategy=strategy,
                        kind="passed", stage="passed", call=True, correct=True, speedup=speedup)
                for run, index, mode, code, speedup, strategy in made]
    mine = [a for a in attempts if a.run == 0]
    view = Archive.of(attempts, migrate_every=1).view(0, epoch_of_next(mine, 1))
    base = {"task": brief_for(task).as_context(), "backend_name": "NVIDIA", "knowledge": "", "example": None}
    shown: dict = {}
    for draw in range(100):  # the first draw of each mode, as run 0's attempt 2 under some --llm-seed
        choice = choose(view, rng_for(draw, "vector_add", 0, len(mine)))
        if choice is not None and choice.mode not in shown and (choice.mode == Mode.CROSSOVER
                                                                or len(choice.inspirations) >= 2):
            shown[choice.mode] = (draw, choice)
    out = []
    for mode, title in ((Mode.OPTIMIZE, "Optimizer, --search evolve"), (Mode.CROSSOVER, "Crossover, --search evolve")):
        draw, choice = shown[mode]
        out.append(f"### {title} (run 0, attempt 2: {choice.origin()}; `--llm-seed {draw}`)\n")
        for message in optimizer.evolve_messages(PromptLibrary(), base, choice, mine):
            out.append(f"**{message['role']}**\n")
            out.append(fence(message["content"]) + "\n")
    return "\n".join(out).rstrip() + "\n"


def main() -> None:
    from kernelwright.store import RunStore

    if "--evolve-examples" in sys.argv[1:]:
        print(evolve_examples(), end="")
        return
    elide = "--elide-instruction" in sys.argv[2:]
    store = RunStore(Path(sys.argv[1]), create=False)
    spec = store.get_meta("spec")
    calls = store.calls()
    print(f"Recorded run: `{spec['command']}` on {', '.join(spec['task_refs'])}, model `{spec['model']}`.\n")
    for role, title in TITLES.items():
        call = next((c for c in calls if c["role"] == role), None)
        if call is None:
            continue
        print(f"### {title} (attempt {call['attempt']})\n")
        for message in call["messages"]:
            print(f"**{message['role']}**\n")
            print(fence(elide_instruction(message["content"]) if elide else message["content"]) + "\n")
        print("**answer** (scripted)\n")
        print(fence(call["answer"] or call["error"]) + "\n")


if __name__ == "__main__":
    main()
