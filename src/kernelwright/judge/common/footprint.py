"""How much memory a problem needs, and what the machine has: the size check that turns a problem
too large for this machine into a `problem_too_large` verdict instead of a SIGKILL or a frame
error (docs/architecture.md, "Memory in proportion to the work")."""

from __future__ import annotations

from . import wire


def proc_status_bytes(pid: int | str = "self", fields: tuple[str, ...] = ("VmRSS", "VmHWM")) -> dict[str, int]:
    """Fields of /proc/PID/status given in kB, as bytes ({} where it cannot be read)."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in fields:
                    found[name] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return found


class ProblemTooLarge(Exception):
    """The task's inputs and outputs would not fit this machine's memory: raised by the reference
    before it builds them (or in place of a reply over the frame limit). The worker makes it a
    `problem_too_large` verdict; only the reference's report is believed."""


PROBLEM_TOO_LARGE_TYPE = f"{__name__}.ProblemTooLarge"  # the name a reply's error_types carries


def memory_need(inputs: int, outputs: int, gpu: bool) -> tuple[int, int]:
    """(host bytes, device bytes) that judging one item of a problem needs, from its input and
    output sizes. Per child (docs/architecture.md, "Memory in proportion to the work"): the
    inputs once, the outputs at most four times (the candidate's outputs, the snapshot taken before
    the repeat call, the repeat's outputs, and their copies into the reply); the reference and the
    candidate child hold theirs at the same time (the reference runs one item ahead), and the
    worker holds one item's outputs from each side plus a comparison's temporaries. On a GPU the
    inputs are made on the host first (KernelBench's get_inputs) and outputs are copied to the host
    to be sent; timing holds each side's input sets (one set past 1 GiB) and a block's fresh copy
    of them next to the other side's."""
    if gpu:
        return 2 * inputs + 6 * outputs, 3 * inputs + 5 * outputs
    return 2 * inputs + 9 * outputs, 0


def host_memory_available() -> int:
    """MemAvailable of /proc/meminfo (what can be allocated without swapping), or 0 if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def max_reply_bytes() -> int:
    # Read at call time, so that a test can lower wire.MAX_REPLY_BYTES for a forked reference.
    return wire.MAX_REPLY_BYTES


def reply_limit(available: int | None = None) -> int:
    """How large a reply to one item may be: outputs travel whole (the worker compares them
    itself). Past the default (`wire.MAX_REPLY_BYTES`, 4 GiB) up to an eighth of the host memory
    available (`available`, default: now), at most `wire.MAX_MESSAGE_BYTES` (16 GiB). A KernelBench
    level-1 activation at its own size (4096 x 393216 float32) returns 6 GiB, and the candidate's
    reply to its repeat item twice that: a 125 GiB host holds both sides' copies (`memory_need`
    still decides whether the whole problem fits). The worker fixes it once, when it starts, for
    itself and its children."""
    available = host_memory_available() if available is None else available
    return max(wire.MAX_REPLY_BYTES, min(available // 8, wire.MAX_MESSAGE_BYTES))


# more than a candidate's reply carries beside its outputs (digests, launch counts, provenance: KiBs)
REPLY_FIELDS_BYTES = 16 << 20


def candidate_reply_need(reference_output_bytes: int, repeat: bool) -> int:
    """The largest reply an honest candidate sends for an item whose reference outputs take
    `reference_output_bytes`: its outputs, twice on a repeat item (the repeat call's too)."""
    return (2 if repeat else 1) * reference_output_bytes + REPLY_FIELDS_BYTES


def candidate_reply_limit(reference_output_bytes: int, limit: int) -> int:
    """How large a candidate's reply to an item may be, once the reference's reply to it is known:
    what an honest one needs on a repeat item (`candidate_reply_need`), at least the default, never
    more than `limit` (the reference already reported a problem whose replies would not fit). A
    candidate cannot make its worker read much more than its task calls for."""
    return min(limit, max(wire.MAX_REPLY_BYTES, candidate_reply_need(reference_output_bytes, True)))


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"
