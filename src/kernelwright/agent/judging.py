"""Sending candidates to the judge so that `--resume` never judges for ever a candidate whose
judging kills the coordinator (the agent's own process: a candidate that kills its ancestors, a
judge bug, the out-of-memory killer).

Every candidate is recorded in the run store as sent to the judge (its task, run, attempt and
code hash) before the judge sees it. A resumed run regenerates the attempt that was in flight (the
response cache answers the same calls with the same code), and then:

- never sent before: judged as usual, beside the other task-runs' candidates;
- sent once already and no verdict stored (the run died while it was judged): judged once more,
  *alone* (no other candidate of this session is judged meanwhile), so that if the judge dies
  again it was this candidate and not one judged beside it;
- sent MAX_JUDGE_STARTS (2) times already: not judged again; its verdict is a judge_error
  ("judging this candidate killed the judge twice (...); not judged again").

A judging that ends without a verdict while the run lives (the judge was closed: Ctrl-C) is
forgotten: it did not kill the run, and a run interrupted twice on one candidate must not fail it.

A candidate that was only being judged beside the guilty one when the run died is therefore
judged again (alone) and gets its real verdict.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING

from ..judge.common.verdict import (
    KILLED_JUDGE,
    MAX_JUDGE_STARTS,
    judge_error_verdict,
    killed_judge_reason,
)
from ..store import RunStore
from .protocols import Judge

if TYPE_CHECKING:
    from ..judge import Verdict
    from ..tasks import Task


def code_sha256(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()


class JudgeTurns:
    """Who may be judged now: candidates judged beside each other share a turn; a suspect (its
    judging started before without a verdict) takes one alone. A waiting suspect goes before any
    candidate that asks after it. A turn is given back when its verdict's future is done (from
    whichever thread settles it), so it is not a thread's lock."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._alone = False
        self._waiting_alone = 0

    def take(self, alone: bool) -> None:
        with self._cond:
            if alone:
                self._waiting_alone += 1
                try:
                    self._cond.wait_for(lambda: not self._alone and self._shared == 0)
                finally:
                    self._waiting_alone -= 1
                self._alone = True
            else:
                self._cond.wait_for(lambda: not self._alone and self._waiting_alone == 0)
                self._shared += 1

    def give(self, alone: bool) -> None:
        with self._cond:
            if alone:
                self._alone = False
            else:
                self._shared -= 1
            self._cond.notify_all()


def submit_recorded(judge: Judge, store: RunStore, turns: JudgeTurns, task: Task, run: int, attempt: int,
                    code: str, candidate_id: str) -> Future[Verdict]:
    """`judge.submit(task, code, candidate_id)`, recorded in `store` first (see the module's
    docstring); a candidate sent MAX_JUDGE_STARTS times without a verdict gets its judge_error
    verdict here, without the judge."""
    sha = code_sha256(code)
    started = store.judge_starts(task.name, run, attempt, sha)
    if len(started) >= MAX_JUDGE_STARTS:
        done: Future = Future()
        verdict = judge_error_verdict(task.name, candidate_id, killed_judge_reason(started), candidate_id=candidate_id)
        verdict.flags.append(KILLED_JUDGE)  # the candidate's doing: the loop goes on to fix it
        done.set_result(verdict)
        return done
    alone = bool(started)
    turns.take(alone)
    start_id = None
    try:
        start_id = store.add_judge_start(task.name, run, attempt, sha)
        future = judge.submit(task, code, candidate_id)
    except BaseException:
        if start_id is not None:
            store.drop_judge_start(start_id)
        turns.give(alone)
        raise

    def finished(f: Future) -> None:
        turns.give(alone)
        if f.cancelled() or f.exception() is not None:
            # no verdict, but this process lives to see it (the pool was closed: Ctrl-C): this
            # judging did not kill the run
            store.drop_judge_start(start_id)

    future.add_done_callback(finished)
    return future


class RecordedJudge:
    """A `Judge` whose submissions are those of one attempt of one task-run, recorded as above
    (the tuning pass judges its variants through it: each is told apart by its code)."""

    def __init__(self, judge: Judge, store: RunStore, turns: JudgeTurns, run: int, attempt: int) -> None:
        self.judge, self.store, self.turns, self.run, self.attempt = judge, store, turns, run, attempt

    def submit(self, task: Task, code: str, candidate_id: str | None = None) -> Future[Verdict]:
        return submit_recorded(self.judge, self.store, self.turns, task, self.run, self.attempt, code,
                               candidate_id or uuid.uuid4().hex)
