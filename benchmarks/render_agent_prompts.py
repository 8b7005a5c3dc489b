"""Print, as markdown, the first prompt of each kind (generator first attempt, reflector,
generator fix, optimizer) that a recorded run sent, exactly as the model received it, read from
the run's store. docs/agent.md's examples come from this script.

    PYTHONPATH=src python benchmarks/render_agent_prompts.py RUN_DIR > prompts.md
"""

from __future__ import annotations

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


def main() -> None:
    from kernelwright.store import RunStore

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
            print(fence(message["content"]) + "\n")
        print("**answer** (scripted)\n")
        print(fence(call["answer"] or call["error"]) + "\n")


if __name__ == "__main__":
    main()
