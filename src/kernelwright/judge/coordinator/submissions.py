"""How candidates reach a judge pool and their verdicts come back (`Submissions`, a part of
`pool.JudgePool`): `submit`, the one primitive, and `judge`, `judge_many` built on it; the
futures (queued, judged by as many threads as the pool has workers, each settled once, every one
not judged yet raising `PoolClosed` at close); a candidate's source text checked (too large, not
text) and written to a file of the pool's own (0700) before any worker sees it.

What judges one candidate file (the static stage, a free worker, a GPU under suspicion) is the
pool's: `JudgePool._judge_file`.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import traceback
import uuid
from concurrent.futures import (
    Future,
    InvalidStateError,
    ThreadPoolExecutor,
    as_completed,
)
from pathlib import Path
from typing import Callable, Iterable

from ...tasks import Task
from ..common.options import JudgeOptions
from ..common.privdir import ensure_private
from ..common.verdict import FailureKind, Verdict, judge_error_verdict
from .static import MAX_SOURCE_BYTES


class PoolClosed(RuntimeError):
    """The pool was closed (Ctrl-C, shutdown) before this candidate's verdict existed."""



class Submissions:
    """The pool's submissions. `JudgePool` holds the state they share (its lock, its closing
    event, its private directory, how many workers) and judges each file (`_judge_file`); a
    `judge_many` admits its jobs' tasks there first (`admit`)."""

    n_workers: int
    private: Path  # the pool's private directory (0700): the sources directory is made in it
    _lock: threading.Lock
    _closing: threading.Event

    def _init_submissions(self) -> None:
        """Sources written to a directory of their own (0700, this pool's, made at the first and
        removed on close), judged by as many threads as there are workers; the futures not
        settled yet (close settles them)."""
        self._sources: Path | None = None
        self._submitter: ThreadPoolExecutor | None = None
        self._pending: set[Future] = set()
        self._submitted = 0

    def submit(self, task: Task, code: str | Path, candidate_id: str | None = None,
               options: JudgeOptions | None = None, *,
               on_start: Callable[[], None] | None = None) -> Future[Verdict]:
        """Judge a candidate in the background: `code` is its source text (a `str`), or a `Path`
        to its file. The future's result is its verdict, with `candidate_id` (a fresh uuid hex when
        none is given). A candidate's problems are verdicts, never exceptions: the future raises
        only PoolClosed, when the pool is closed before the candidate was judged. Submissions queue;
        the pool's workers take them as they come free. `on_start` is called, in the judging
        thread, when the candidate is taken up (before its static stage, before any worker sees
        it): a caller that must know what was being judged when its process died records it there."""
        return self._enqueue(task, code, candidate_id or uuid.uuid4().hex, options, on_start, raise_errors=False)

    def judge(self, task: Task, candidate: str | Path, options: JudgeOptions | None = None,
              candidate_id: str | None = None) -> Verdict:
        """Judge one candidate file (static stage here, the rest on a free worker) and wait for
        its verdict. Unlike `submit`'s future, this raises what stopped the judging (a device
        that cannot start: DeviceUnavailable; PoolClosed)."""
        future = self._enqueue(task, Path(candidate), candidate_id or uuid.uuid4().hex, options, None,
                               raise_errors=True)
        return future.result()

    def judge_many(self, jobs: Iterable[tuple[Task, str | Path]],
                   on_verdict: Callable[[int, Verdict], None] | None = None,
                   options: JudgeOptions | None = None,
                   on_start: Callable[[int], None] | None = None) -> list[Verdict]:
        """Judge many candidate files in parallel, one per worker at a time, taken in input order;
        results in input order. `on_verdict(i, verdict)` is called (in this thread) as each
        verdict arrives, `on_start(i)` (in the judging thread) as each candidate is taken up."""
        jobs = list(jobs)
        self.admit(task for task, _ in jobs)
        futures: dict[Future, int] = {}
        for i, (task, path) in enumerate(jobs):
            started = (lambda i=i: on_start(i)) if on_start is not None else None
            futures[self.submit(task, Path(path), options=options, on_start=started)] = i
        results: list[Verdict | None] = [None] * len(jobs)
        for future in as_completed(futures):
            i = futures[future]
            try:
                results[i] = future.result()
            except PoolClosed:
                continue  # interrupted: no verdict, so a resumed run judges it
            if on_verdict is not None:
                try:
                    on_verdict(i, results[i])
                except Exception:  # noqa: BLE001 - the caller's bug must not cost the other verdicts
                    traceback.print_exc()
        if self._closing.is_set() and any(r is None for r in results):
            raise PoolClosed(f"the judge pool was closed with {sum(r is None for r in results)} "
                             "candidate(s) not judged")
        # aligned with `jobs` whatever happened: a dropped entry would shift every later verdict
        # onto the wrong candidate (it did, once, in CI)
        return [r if r is not None else
                judge_error_verdict(task.name, str(path), "internal judge error: this candidate's judging thread stopped")
                for r, (task, path) in zip(results, jobs)]

    def _enqueue(self, task: Task, code: str | Path, candidate_id: str, options: JudgeOptions | None,
                 on_start: Callable[[], None] | None, raise_errors: bool) -> Future[Verdict]:
        future: Future = Future()
        with self._lock:
            if self._closing.is_set():
                future.set_exception(PoolClosed("the judge pool is closed"))
                return future
            if self._submitter is None:
                self._submitter = ThreadPoolExecutor(max_workers=self.n_workers,
                                                     thread_name_prefix="kernelwright-submit")
            self._pending.add(future)
            self._submitter.submit(self._judge_submission, future, task, code, candidate_id, options, on_start,
                                   raise_errors)
        return future

    def _judge_submission(self, future: Future, task: Task, code: str | Path, candidate_id: str,
                          options: JudgeOptions | None, on_start: Callable[[], None] | None,
                          raise_errors: bool) -> None:
        try:
            if future.done() or not future.set_running_or_notify_cancel():
                return
        except (InvalidStateError, RuntimeError):
            return  # settled by close() meanwhile
        path: Path | None = code if isinstance(code, Path) else None
        written: Path | None = None
        try:
            if on_start is not None:
                on_start()
            verdict = None if isinstance(code, Path) else self._source_verdict(task, code, candidate_id)
            if verdict is None:
                if path is None:
                    path = written = self._write_source(code, candidate_id)  # type: ignore[arg-type]
                verdict = self._judge_file(task, path, options)
                verdict.candidate_id = candidate_id
            verdict.shrink = task.shrink  # every verdict says whether its sizes were shrunk (--shrink)
            _settle(future, result=verdict)
        except PoolClosed as exc:
            _settle(future, error=exc)
        except Exception as exc:  # noqa: BLE001 - a judge bug costs this verdict, never the caller's loop
            if self._closing.is_set():  # e.g. the spawner refusing work after close: not this candidate's fault
                _settle(future, error=PoolClosed("the judge pool was closed while this candidate was judged"))
            elif raise_errors:
                _settle(future, error=exc)
            else:
                verdict = judge_error_verdict(task.name, str(path or candidate_id), f"internal judge error: {exc!r}",
                                              detail=traceback.format_exc(), candidate_id=candidate_id)
                verdict.shrink = task.shrink
                _settle(future, result=verdict)
        finally:
            with self._lock:
                self._pending.discard(future)
            if written is not None:
                try:
                    written.unlink()
                except OSError:
                    pass

    def _close_submissions(self) -> None:
        """Every submission not judged yet raises PoolClosed; the sources directory goes."""
        with self._lock:
            pending, self._pending = list(self._pending), set()
            submitter, self._submitter = self._submitter, None
        for future in pending:
            _settle(future, error=PoolClosed("the judge pool was closed before this candidate was judged"))
        if submitter is not None:
            submitter.shutdown(wait=False, cancel_futures=True)
        if self._sources is not None:
            shutil.rmtree(self._sources, ignore_errors=True)

    @staticmethod
    def _source_verdict(task: Task, code: str, candidate_id: str) -> Verdict | None:
        """The static verdict of source text that is not worth a file: too large, not text."""
        def fail(reason: str, kind: FailureKind) -> Verdict:
            return Verdict(task=task.name, candidate=candidate_id, stage="static", call=False, correct=False,
                           reason=reason, kind=kind, candidate_id=candidate_id)

        if not isinstance(code, str):
            return fail(f"the candidate's source is a {type(code).__name__}, not text", FailureKind.SYNTAX_ERROR)
        if len(code) > MAX_SOURCE_BYTES:  # (characters: at least as many bytes)
            return fail(f"candidate source is {len(code)} characters; the limit is {MAX_SOURCE_BYTES} bytes",
                        FailureKind.TOO_LARGE)
        try:
            code.encode("utf-8")
        except UnicodeEncodeError:
            return fail("candidate source cannot be written as UTF-8 text", FailureKind.SYNTAX_ERROR)
        return None

    def _write_source(self, code: str, candidate_id: str) -> Path:
        """`code` in a new file of this pool's sources directory (0700; the file 0600), named
        after the candidate (sanitized; a counter keeps names unique)."""
        with self._lock:
            if self._closing.is_set():
                raise PoolClosed("the judge pool was closed before this candidate was judged")
            if self._sources is None:
                self._sources = Path(tempfile.mkdtemp(prefix=f"sources-{os.getpid()}-",
                                                      dir=ensure_private(self.private / "sources")))
            self._submitted += 1
            number = self._submitted
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", candidate_id)[:80].lstrip(".") or "candidate"
        path = self._sources / f"{stem}-{number}.py"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(code)
        return path


def _settle(future: Future, result: Verdict | None = None, error: BaseException | None = None) -> None:
    """Give `future` its verdict or exception, unless it already has one (close() and a judging
    thread may race to settle it)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except InvalidStateError:
        pass

