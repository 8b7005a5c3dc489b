"""The worker's end of its children: a forked child and its private pipe (`ChildProcess`), the
clock a reply is waited for on, the reference's correctness items streamed ahead of the reader
(`ReferenceStream`), and the running time a candidate is allowed on one item (`running_limit`).

A child that does not answer (timed out, died, sent something unreadable) raises `ChildFailure`;
what that means for a verdict is `failures.child_failure`'s to say.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any, Callable

from ..common import procs, wire
from ..common.footprint import gib
from ..common.gpulock import MAX_LOCK_CREDIT_S
from ..common.lockholders import timing_turn_elsewhere
from ..common.messages import MessageError, Ready, parse_notice, parse_reply
from ..common.options import ChildOptions, JudgeOptions
from ..common.requests import ExitRequest, Request, RunItem, RunRequest
from ..sandbox.child import STACK_DUMP_SIGNAL, child_main
from .limits import WATCH_S, Limits

# While a child says it queues for the GPU, its worker looks this often at who holds the lock.
LOCK_CHECK_S = 1.0

LOG_TAIL_BYTES = 4000
STACK_DUMP_WAIT_S = 0.5


def running_limit(opts: JudgeOptions, cap: float, reference_s: float | None) -> tuple[float, str]:
    """The candidate's running time allowed on one item (compiling is bounded apart, by
    `compile_timeout`), and how it was chosen: `run_timeout`, or `run_timeout_factor` times the
    reference's own running time on the same item where that is known, whichever is longer, at
    most `cap` (`call_timeout` for the first call, `case_timeout` after it). See JudgeOptions."""
    floor, factor = float(opts.run_timeout), float(opts.run_timeout_factor)
    base = max(floor, factor * reference_s) if reference_s is not None else floor
    limit = min(cap, base)
    # How the limit was chosen, without its number: the timeout's reason says that once
    # (`ChildProcess._timeout_reason`).
    why = (f"run_timeout_factor {factor:g} x the reference's {reference_s:.3g} s on this item"
           if reference_s is not None and factor * reference_s > floor else "run_timeout")
    return limit, f"{why}, at most {cap:g} s" if limit < cap else "this stage's cap"


def _seconds(s: float) -> str:
    """A limit for a reason: tenths at most (a limit scaled from the reference's time is 9.35793 s)."""
    return f"{s:.1f}".rstrip("0").rstrip(".")


class ChildFailure(Exception):
    """A child did not answer: it timed out, died, or sent something unreadable."""

    def __init__(self, kind: str, reason: str, log_tail: str = "", doing: str = "") -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.log_tail = log_tail
        self.doing = doing  # set where `reason` leaves it out (a timeout): `described` adds it

    @property
    def described(self) -> str:
        """The reason with what the child was doing, for a message that does not say it already."""
        return f"{self.reason} while {self.doing}" if self.doing else self.reason


@dataclass
class ReplyClock:
    """The time one reply has taken, split by what the child said it was doing: running (against
    `limit`, grown by tune notices up to `cap`), compiling (against `compile_timeout`), or queued
    for the GPU lock (against `MAX_LOCK_CREDIT_S`); `mark` is when the current stretch began."""

    limit: float
    cap: float
    compile_timeout: float
    ran: float = 0.0
    compiled: float = 0.0
    credit: float = 0.0
    compiling: bool = False
    waiting: bool = False
    mark: float = field(default_factory=time.monotonic)
    unqueued: bool = False  # it said it queued for the GPU while no timing turn held it
    initial: float = 0.0  # `limit` before tune notices grew it (set from it when 0)

    def __post_init__(self) -> None:
        self.initial = self.initial or self.limit

    @property
    def phase(self) -> str:
        return "waiting" if self.waiting else "compiling" if self.compiling else "running"

    def budget(self, now: float) -> float:
        """Seconds left, at `now`, to the limit of the current phase."""
        elapsed = now - self.mark
        if self.waiting:
            return MAX_LOCK_CREDIT_S - self.credit - elapsed
        if self.compiling:
            return self.compile_timeout - self.compiled - elapsed
        return self.limit - self.ran - elapsed

    def charge(self, now: float) -> None:
        """The stretch from `mark` to `now`, to the current phase."""
        if self.waiting:
            self.credit += now - self.mark
        elif self.compiling:
            self.compiled += now - self.mark
        else:
            self.ran += now - self.mark
        self.mark = now

    def lock_notice(self, state: Any) -> None:
        if state == "waiting":
            self.waiting = True
        elif state == "got":
            self.waiting = False

    def check_wait(self, now: float, turn_elsewhere: bool | None) -> None:
        """While the child says it queues: the stretch is queueing only if a timing turn outside
        the worker's own tree holds the GPU (None: cannot be known, believed as before); otherwise
        the claim is void and the stretch since `mark` counts as running."""
        if turn_elsewhere is False:
            self.waiting, self.unqueued = False, True
        self.charge(now)


class ChildProcess:
    """A forked child and the worker's end of its private pipe.

    Every request carries a sequence number that its replies echo; `recv` matches each reply to
    the oldest request not yet answered (its op and number), so a frame the candidate wrote on
    the pipe itself (an unsolicited "ok", a reply to a request never sent) is that child's
    protocol failure instead of being read as the answer to the next request."""

    # (seq, op) of the requests sent and not yet answered; None for a child played by a test
    pending: deque | None = None
    # the most seconds of compiling per reply, and the running time an autotuner config adds
    # (set per verdict from JudgeOptions: `Worker._apply_limits`)
    compile_timeout: float = JudgeOptions.compile_timeout
    tune_config_s: float = JudgeOptions.tune_config_s
    # the running seconds (compiling and queueing left out) of the last reply, by the worker's clock
    last_run_s: float | None = None
    device: str | None = None  # "cpu", "cuda", ... (None for a child played by a test)
    # Set for one verdict by `lockguard.install`: run before each request (the candidate: its tree
    # must not hold the GPU lock between requests), and once a second while this child queues for
    # the GPU (the reference: is it the candidate's hold it waits for?). Each raises the
    # candidate's failure.
    idle_check: Callable[[], None] | None = None
    lock_culprit: Callable[[], None] | None = None
    sent_at: float = 0.0  # monotonic time the last request was written (a timing block's wall clock starts here)
    # The largest frame read from this child (None: wire.MAX_REPLY_BYTES): a reference's is its
    # worker's `footprint.reply_limit`, a candidate's follows its reference's outputs per item.
    max_reply_bytes: int | None = None
    # The child's own directory (None: not confined, or a child played by a test), removed when
    # it is killed; and how it is confined, as it said when ready (`Ready.sandbox`).
    scratch: str | None = None
    # the scratch's path, kept after it is removed: a confined candidate's tracebacks name the
    # copy of its source there, and its verdict names the submitted file instead
    scratch_dir: str = ""
    sandbox: dict = {}
    # a confined candidate's bytes written and processes, looked at while it is waited for
    limits: Limits | None = None

    def __init__(self, role: str, task, device: str, options: ChildOptions,
                 on_lock_stats: Callable[[dict], None] | None = None) -> None:

        self.role = role
        self.device = device
        self.on_lock_stats = on_lock_stats  # seconds the child waited for the GPU / compiled unlocked
        self.task = task
        box = options.sandbox
        self.scratch = box.scratch if box is not None and box.on else None
        self.sandbox = {}
        self.scratch_dir = self.scratch or ""
        if self.scratch and role == "candidate":
            self.limits = Limits((self.scratch, *(p for p in box.write if os.path.isdir(p))),
                                 max_bytes=box.max_written_bytes)
        fd, self.log_path = tempfile.mkstemp(prefix=f"kernelwright-{role}-", suffix=".log")
        os.close(fd)
        parent_conn, child_conn = Pipe(duplex=True)
        pid = os.fork()
        if pid == 0:  # the child: never returns
            child_main(child_conn.fileno(), role, task, device, self.log_path, options)
        child_conn.close()
        self.pid = pid
        self.conn: Connection = parent_conn
        self.info: dict[str, Any] | None = None
        self.alive = True
        self.stopped = False
        self.seq = 0
        self.pending = deque([(0, "ready")])  # the child's first message, unasked

    # -- messaging ---------------------------------------------------------------------------
    def ready(self, timeout: float) -> dict:

        if self.info is None:
            try:
                reply = parse_reply(self.recv(timeout, "starting"), "ready", self.role)
                if not isinstance(reply, Ready):
                    raise MessageError("the child's first message is not its description")
            except MessageError as exc:
                self.kill()
                raise ChildFailure("protocol", f"unreadable reply while starting: {exc}", self.log_tail()) from None
            self.info = reply.info()
            self.sandbox = reply.sandbox
        return self.info

    def send(self, request: Request) -> None:
        msg = request.to_wire()
        if self.pending is not None and not isinstance(request, ExitRequest):
            self.seq += 1
            msg["seq"] = self.seq
            self.pending.append((self.seq, request.op))
        try:
            self.conn.send(msg)
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise self._death("receiving a request") from None
        self.sent_at = time.monotonic()

    def recv(self, timeout: float, doing: str, cap: float | None = None, note: str = "") -> dict:
        """The next reply, within `timeout` seconds of running. The child's notices split the
        time (`compilewatch`, `messages.CompileNotice`): between "compile" start and end it is
        compiling, bounded by `compile_timeout` per reply instead; each "tune" notice (an
        autotuner benchmarks one more config) adds `tune_config_s` of running time, up to `cap`
        (default: `timeout`, no allowance). Between `gpu_lock` notices "waiting" and "got" (it
        queues for the shared GPU lock behind a timing turn) the clock stops, for at most
        `MAX_LOCK_CREDIT_S` per reply: a forged notice can delay a verdict by that much, and a
        forged compile span by `compile_timeout`, never stop the clock for good. `note` says,
        in a timeout's reason, how the running limit was chosen."""

        clock = ReplyClock(limit=timeout, cap=timeout if cap is None else max(cap, timeout),
                           compile_timeout=self.compile_timeout)
        while True:
            now = time.monotonic()
            budget = clock.budget(now)
            checking = clock.waiting and budget > LOCK_CHECK_S
            watching = self.limits is not None and budget > WATCH_S
            if not self._poll(LOCK_CHECK_S if checking else WATCH_S if watching else budget, doing):
                self._check_limits()
                if checking:
                    if self.lock_culprit is not None:
                        # whatever else holds the GPU: a reader of another worker can hold the
                        # turnstile while it too waits for our candidate's hold
                        self.lock_culprit()
                    clock.check_wait(time.monotonic(), self.turn_elsewhere())
                    continue
                if watching:
                    continue
                clock.charge(now)
                self.dump_stacks()
                self.kill()
                raise ChildFailure("timeout", self._timeout_reason(clock, note), self.log_tail(), doing)
            reply = self._read_frame(doing)
            is_lock = isinstance(reply, dict) and reply.get("op") == "gpu_lock"
            try:
                notice = None if is_lock else parse_notice(reply)
            except MessageError as exc:
                self.kill()
                raise ChildFailure("protocol", f"unreadable reply while {doing}: {exc}", self.log_tail()) from None
            if not is_lock and notice is None:
                clock.charge(time.monotonic())
                self.last_run_s = clock.ran  # by the worker's clock: the candidate's limits scale from it
                break
            clock.charge(time.monotonic())  # the stretch since the last notice, to what it was
            if is_lock:
                clock.lock_notice(reply.get("state"))
            elif notice.op == "compile":
                clock.compiling = notice.state == "start"
            else:  # one more autotuner config to benchmark
                clock.limit = min(clock.cap, clock.limit + self.tune_config_s)
        if self.pending is not None:
            self._match(reply, doing)
        stats = reply.pop("gpu_lock_s", None) if isinstance(reply, dict) else None
        if isinstance(stats, dict) and self.on_lock_stats is not None:
            self.on_lock_stats(stats)
        return reply

    def _check_limits(self) -> None:
        """Kill a candidate over a limit of its sandbox (`limits`): its failure says which."""
        why = self.limits.over(self.pid) if self.limits is not None else None
        if why is not None:
            self.kill()
            raise ChildFailure("resource_limit", why, self.log_tail())

    def turn_elsewhere(self) -> bool | None:
        """Whether another worker's timing turn holds the GPU: the worker's own tree (itself, its
        children and whatever they spawned or left re-parented to it) does not count."""
        if self.device == "cpu":
            return False  # no GPU lock on a CPU: a child that says it queues for one is lying
        me = os.getpid()
        return timing_turn_elsewhere({me, *procs.descendants(me)})

    def _poll(self, budget: float, doing: str) -> bool:
        """Whether a frame began within `budget` seconds."""
        try:
            return self.conn.poll(max(0.0, budget))
        except (EOFError, ConnectionResetError, OSError):
            raise self._death(doing) from None

    def _read_frame(self, doing: str) -> Any:
        """The next frame, decoded; a frame that cannot be read is the child's failure."""

        try:
            return wire.decode(wire.read_frame(self.conn.fileno(), self.max_reply_bytes or wire.MAX_REPLY_BYTES),
                               share=True)  # a fresh buffer, ours alone
        except (EOFError, ConnectionResetError, OSError):
            raise self._death(doing) from None
        except wire.FrameTimeout as exc:  # half a reply, then nothing: a hung (or hostile) child
            self.dump_stacks()
            self.kill()
            raise ChildFailure("timeout", f"{exc} while {doing}", self.log_tail()) from None
        except wire.FrameTooLarge as exc:  # outputs too large to travel whole (or a forged size)
            self.kill()
            raise ChildFailure("too_large", f"{gib(exc.size)} reply while {doing}, over the "
                               f"{gib(exc.limit)} a reply may carry", self.log_tail()) from None
        except wire.WireError as exc:  # an oversized or malformed reply
            self.kill()
            raise ChildFailure("protocol", f"unreadable reply while {doing}: {exc}", self.log_tail()) from None

    def _match(self, reply: Any, doing: str) -> None:
        """The reply must answer the oldest request still unanswered: same op, same number."""
        if not self.pending:
            problem = "a reply to no request"
        else:
            seq, op = self.pending.popleft()
            got = (reply.get("seq"), reply.get("op")) if isinstance(reply, dict) else (None, None)
            problem = None if got == (seq, op) else (
                f"a reply numbered {str(got[0])[:20]} ({str(got[1])[:40]}) where request {seq} ({op}) was due")
        if problem:
            self.kill()
            raise ChildFailure("protocol", f"unreadable reply while {doing}: {problem}", self.log_tail())

    def request(self, request: Request, timeout: float, doing: str, cap: float | None = None,
                note: str = "") -> dict:
        if self.idle_check is not None:
            self.idle_check()
        self.send(request)
        return self.recv(timeout, doing, cap, note)

    def _timeout_reason(self, clock: "ReplyClock", note: str) -> str:
        """What ran out, in one sentence: the limit once, how it was chosen (`note`), and how
        long each other part of the reply's time went. What the child was doing is not in it:
        every caller puts that first (`failures.child_failure`: "case 64 float32: timed out ...")."""
        phase, ran, compiled, queued = clock.phase, clock.ran, clock.compiled, clock.credit
        if phase == "waiting":
            return f"waited more than {MAX_LOCK_CREDIT_S:g} s for the GPU"
        parts = [f"{compiled:.1f} s compiling"] if compiled >= 0.1 and phase == "running" else []
        parts += [f"{ran:.1f} s running"] if phase == "compiling" and ran >= 0.1 else []
        parts += [f"{queued:.0f} s queueing for the GPU"] if queued >= 1 else []
        plus = f" (plus {', '.join(parts)})" if parts else ""
        if phase == "compiling":
            return (f"timed out after {self.compile_timeout:g} s compiling Triton kernels{plus}, the compile "
                    "limit (compile_timeout): a compile that never ends?")
        how = [note] if note else []
        if clock.limit > clock.initial:
            how.append("raised for the autotuner's configs")
        how.append("compiling is limited apart")
        if clock.unqueued:
            how.append("it said it was queueing for the GPU while no other timing turn held it")
        return (f"timed out after {_seconds(clock.limit)} s running{plus}, its running limit ({'; '.join(how)}): "
                "an infinite loop in host code, or a kernel that never terminates?")

    def _death(self, doing: str) -> ChildFailure:
        status = procs.reap(self.pid, timeout=5.0)
        self.alive = False
        self.kill()
        if status is None:
            how = "closed its channel"
        elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            how = "exited with status 0 before reporting a result (sys.exit/os._exit in the candidate?)"
        else:
            how = procs.describe_status(status)
        return ChildFailure("crash", f"the process {how} while {doing}", self.log_tail())

    # -- control -----------------------------------------------------------------------------
    def pause(self) -> None:
        """SIGSTOP the whole group while the other side is timed: nothing it left running on the
        host (threads, helper processes) can steal time from the measurement."""
        if self.alive and not self.stopped:
            try:
                os.killpg(self.pid, signal.SIGSTOP)
                self.stopped = True
            except (ProcessLookupError, PermissionError):
                pass

    def resume(self) -> None:
        if self.stopped:
            try:
                os.killpg(self.pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
            self.stopped = False

    def dump_stacks(self) -> None:
        """Ask a child that ran out of time to write every thread's Python stack to its log
        (faulthandler, installed at its start), so the timeout's log tail says where it hung."""

        if not self.alive or self.pid <= 0:  # (os.kill(-1, ...) would signal every process)
            return
        self.resume()
        try:
            os.kill(self.pid, STACK_DUMP_SIGNAL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(STACK_DUMP_WAIT_S)

    def kill(self) -> None:
        self.resume()
        procs.kill_group(self.pid)
        procs.reap(self.pid, timeout=5.0)
        self.alive = False
        if self.scratch:  # its own directory: what it wrote goes with it
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
        try:
            self.conn.close()
        except OSError:
            pass

    def close(self, timeout: float = 2.0) -> None:
        if self.alive:
            try:
                self.conn.send(ExitRequest().to_wire())
            except OSError:
                pass
        self.kill()

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - LOG_TAIL_BYTES))
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def remove_log(self) -> None:
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


class ReferenceStream:
    """The reference's correctness items, sent one message each and kept `ahead` items ahead of
    the reader: the reference computes the next item while the candidate runs this one, yet never
    runs far past a failure (a whole parametrization used to be computed and then thrown away).
    `probe(j)` asks for item j again with the probes on; replies of items already in flight are
    read first and kept, so the order of the stream is never disturbed."""

    def __init__(self, ref: "ChildProcess", items: list[RunItem], gpu_lock: bool, ahead: int = 1) -> None:
        self.ref, self.items, self.gpu_lock, self.ahead = ref, items, gpu_lock, ahead
        self.sent = 0  # items[:sent] have been asked for
        self.outstanding: list[Any] = []  # tags of requests whose replies are not read yet, in order
        self.kept: dict[Any, dict] = {}

    @property
    def pending(self) -> int:
        return len(self.outstanding)

    def _ask(self, tag: Any, item: RunItem) -> None:
        self.ref.send(RunRequest(items=[item], gpu_lock=self.gpu_lock))
        self.outstanding.append(tag)

    def _await(self, tag: Any, timeout: float, doing: str) -> dict:
        while tag not in self.kept:
            head = self.outstanding[0]
            self.kept[head] = self.ref.recv(timeout, doing)
            self.outstanding.pop(0)
        return self.kept.pop(tag)

    def reply(self, j: int, timeout: float, doing: str) -> dict:
        """Item j's reply (items are read in order)."""
        while self.sent < min(len(self.items), j + 1 + self.ahead):
            self._ask(self.sent, self.items[self.sent])
            self.sent += 1
        return self._await(j, timeout, doing)

    def probe(self, j: int, timeout: float, doing: str) -> dict:
        """Item j computed again, with its undefined output positions found by the probes."""
        self._ask(("probe", j), dataclasses.replace(self.items[j], probe=True))
        return self._await(("probe", j), timeout, doing)
