"""Print, as markdown, the first prompt of each kind (generator first attempt, reflector,
generator fix, optimizer) that a recorded run sent, exactly as the model received it, read from
the run's store. docs/agent.md's examples come from this script.

    PYTHONPATH=src python benchmarks/render_agent_prompts.py RUN_DIR [--elide-instruction] > prompts.md

--elide-instruction replaces the task's instruction (the text under "## Task:") with a note of its
length: a benchmark's instructions are its data, which this repository does not copy.
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


def main() -> None:
    from kernelwright.store import RunStore

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
