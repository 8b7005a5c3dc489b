"""The run store: one SQLite database per run directory, the single source of truth of a run.

It holds the run's settings, every LLM call (prompt, answer, tokens, cost), every attempt
(candidate code, verdict, latencies, feedback), when each task-run ended, and when each candidate
was sent to the judge (before it was judged: a resumed run tells a candidate whose judging killed
the judge, and it, from one never judged). Attempts and calls
are inserted, never updated (a trigger refuses updates), and each insert is committed at once,
so a run killed at any moment loses at most the call or verdict in flight; `--resume` reads the
store back and continues from there. Reports and metrics read only the store.

The store knows records, not the agent's classes: an attempt is anything with `to_dict()` and the
key fields, and `decode` (the agent passes `Attempt.from_dict`) turns stored records back into
objects.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

DB_NAME = "run.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (
    task TEXT NOT NULL, run INTEGER NOT NULL, idx INTEGER NOT NULL, mode TEXT NOT NULL,
    kind TEXT NOT NULL, speedup REAL, record TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (task, run, idx));
CREATE TABLE IF NOT EXISTS llm_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, run INTEGER NOT NULL,
    attempt INTEGER NOT NULL, role TEXT NOT NULL, model TEXT, messages TEXT NOT NULL, answer TEXT,
    input_tokens INTEGER, output_tokens INTEGER, cost_usd REAL, cache_hit INTEGER,
    finish_reason TEXT, latency_s REAL, error TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS task_runs_ended (
    task TEXT NOT NULL, run INTEGER NOT NULL, reason TEXT NOT NULL, best INTEGER, created REAL NOT NULL,
    PRIMARY KEY (task, run));
CREATE TABLE IF NOT EXISTS judge_starts (
    task TEXT NOT NULL, run INTEGER NOT NULL, idx INTEGER NOT NULL, code_sha256 TEXT NOT NULL,
    created REAL NOT NULL);
CREATE TRIGGER IF NOT EXISTS attempts_immutable BEFORE UPDATE ON attempts
    BEGIN SELECT RAISE(ABORT, 'attempts are immutable'); END;
CREATE TRIGGER IF NOT EXISTS calls_immutable BEFORE UPDATE ON llm_calls
    BEGIN SELECT RAISE(ABORT, 'LLM calls are immutable'); END;
"""


class StoreError(RuntimeError):
    """A run directory that cannot be used as asked (missing, not a run, another version)."""


class RunStore:
    def __init__(self, run_dir: Path | str, *, create: bool = True,
                 decode: Callable[[dict[str, Any]], Any] | None = None, readonly: bool = False) -> None:
        """`readonly`: only read (reports, `show`): the database is opened read-only and nothing
        is written, not even the schema, so a run still going is never disturbed (WAL: the
        writer goes on while this reads a consistent snapshot per query)."""
        self.run_dir = Path(run_dir).expanduser().resolve()
        self.decode = decode
        path = self.run_dir / DB_NAME
        if (readonly or not create) and not path.is_file():
            raise StoreError(f"{self.run_dir} is not a kernelwright run directory (no {DB_NAME}); "
                             "pass the --out directory of an earlier run")
        self._lock = threading.Lock()
        if readonly:
            self._db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, check_same_thread=False,
                                       isolation_level=None, timeout=30)
        else:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        version = self.get_meta("schema_version")
        if version is None and not readonly:
            self.put_meta("schema_version", SCHEMA_VERSION)
        elif version is not None and version != SCHEMA_VERSION:
            raise StoreError(f"{path} has schema version {version}; this kernelwright reads {SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- settings ---------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put_meta(self, key: str, value: Any) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value)))

    # -- attempts ---------------------------------------------------------------------------
    def add_attempt(self, attempt: Any) -> None:
        record = json.dumps(attempt.to_dict())
        with self._lock:
            self._db.execute(
                "INSERT INTO attempts (task, run, idx, mode, kind, speedup, record, created) VALUES (?,?,?,?,?,?,?,?)",
                (attempt.task, attempt.run, attempt.index, attempt.mode, attempt.kind, attempt.speedup, record,
                 attempt.created or time.time()))

    def attempts(self, task: str | None = None, run: int | None = None) -> list[Any]:
        query, args = "SELECT record FROM attempts", []
        where = []
        if task is not None:
            where.append("task = ?")
            args.append(task)
        if run is not None:
            where.append("run = ?")
            args.append(run)
        if where:
            query += " WHERE " + " AND ".join(where)
        query += " ORDER BY task, run, idx"
        with self._lock:
            rows = self._db.execute(query, args).fetchall()
        records = [json.loads(r[0]) for r in rows]
        return [self.decode(r) for r in records] if self.decode else records

    # -- LLM calls --------------------------------------------------------------------------
    def add_call(self, task: str, run: int, attempt: int, reply: Any) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO llm_calls (task, run, attempt, role, model, messages, answer, input_tokens, "
                "output_tokens, cost_usd, cache_hit, finish_reason, latency_s, error, created) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (task, run, attempt, reply.role, reply.model, json.dumps(reply.messages), reply.text,
                 reply.input_tokens, reply.output_tokens, reply.cost_usd, int(reply.cache_hit),
                 reply.finish_reason, reply.latency_s, reply.error, reply.created))

    def calls(self, task: str | None = None, run: int | None = None) -> list[dict[str, Any]]:
        query, args = "SELECT * FROM llm_calls", []
        if task is not None:
            query += " WHERE task = ?" + (" AND run = ?" if run is not None else "")
            args = [task] + ([run] if run is not None else [])
        query += " ORDER BY id"
        with self._lock:
            cursor = self._db.execute(query, args)
            names = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
        out = [dict(zip(names, r)) for r in rows]
        for row in out:
            row["messages"] = json.loads(row["messages"])
        return out

    def call_stats(self) -> list[dict[str, Any]]:
        """Every call's numbers (no prompt, no answer), in order: what a report shows of each call,
        without reading and decoding every prompt of the run."""
        with self._lock:
            cursor = self._db.execute("SELECT task, run, attempt, role, model, input_tokens, output_tokens, cost_usd, "
                                      "cache_hit, finish_reason, latency_s, error FROM llm_calls ORDER BY id")
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, r)) for r in cursor.fetchall()]

    def call_count(self, task: str | None = None) -> int:
        query, args = "SELECT COUNT(*) FROM llm_calls", []
        if task is not None:
            query, args = query + " WHERE task = ?", [task]
        with self._lock:
            return int(self._db.execute(query, args).fetchone()[0])

    def spend(self, task: str | None = None, run: int | None = None) -> tuple[float, int]:
        """(USD, tokens) paid so far: cache hits cost nothing, failed calls count their tokens (0)."""
        query = "SELECT COALESCE(SUM(cost_usd), 0), COALESCE(SUM(input_tokens + output_tokens), 0) FROM llm_calls"
        args: list[Any] = []
        if task is not None:
            query += " WHERE task = ?" + (" AND run = ?" if run is not None else "")
            args = [task] + ([run] if run is not None else [])
        with self._lock:
            cost, tokens = self._db.execute(query, args).fetchone()
        return float(cost), int(tokens)

    # -- candidates sent to the judge -------------------------------------------------------
    def add_judge_start(self, task: str, run: int, attempt: int, code_sha256: str) -> int:
        """The candidate `code_sha256` of attempt `attempt` is about to be judged (committed at
        once, before the judge sees it: if judging it kills this process, the record stays).
        Returns the record's id, for `drop_judge_start`."""
        with self._lock:
            cursor = self._db.execute("INSERT INTO judge_starts (task, run, idx, code_sha256, created) "
                                      "VALUES (?,?,?,?,?)", (task, run, attempt, code_sha256, time.time()))
            return int(cursor.lastrowid or 0)

    def drop_judge_start(self, start_id: int) -> None:
        """Forget a start whose judging ended without a verdict while this process lived (the
        judge was closed: Ctrl-C): it did not kill the run, and must not count as if it had."""
        with self._lock:
            self._db.execute("DELETE FROM judge_starts WHERE rowid = ?", (start_id,))

    def judge_starts(self, task: str, run: int, attempt: int, code_sha256: str) -> list[float]:
        """When this candidate of this attempt was sent to the judge, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT created FROM judge_starts WHERE task = ? AND run = ? AND idx = ? "
                                    "AND code_sha256 = ? ORDER BY created", (task, run, attempt, code_sha256)).fetchall()
        return [float(r[0]) for r in rows]

    # -- task-run ends ----------------------------------------------------------------------
    def end_task_run(self, task: str, run: int, reason: str, best: int | None) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO task_runs_ended (task, run, reason, best, created) "
                             "VALUES (?,?,?,?,?)", (task, run, reason, best, time.time()))

    def reopen_task_runs(self, keys: Iterable[tuple[str, int]]) -> None:
        """Forget that these task-runs ended: a resumed run given more iterations or budget
        continues them (each ends again, with its new reason). Attempts are never touched."""
        with self._lock:
            self._db.executemany("DELETE FROM task_runs_ended WHERE task = ? AND run = ?", list(keys))

    def ended(self) -> dict[tuple[str, int], dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT task, run, reason, best FROM task_runs_ended").fetchall()
        return {(t, r): {"reason": reason, "best": best} for t, r, reason, best in rows}


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    tmp.replace(path)
