"""Content-addressed response cache in SQLite.

The key is the SHA-256 of a canonical JSON document holding everything that determines the
answer: provider, model name, messages, sampling parameters and the sample index (so the 5
samples of one prompt at temperature 0.8 are 5 entries, and sample 3 replays as sample 3).
The base URL and API key are *not* part of the key: the same model behind another URL (a vLLM
server moved to another node, or no server at all during an offline replay) gives the same
answers. Point `llm.cache_dir` elsewhere to keep two deployments' answers apart.

Concurrency: each thread uses its own connection; WAL mode lets readers proceed while one
process writes, and `INSERT OR IGNORE` makes the first stored answer win, so parallel workers or
processes that raced on the same key all replay the same answer afterwards.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

KEY_VERSION = 1  # bump when the key document changes, so old entries stop matching

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    created_at REAL NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL
)
"""


def cache_key(
    model_id: str,
    messages: Sequence[Mapping[str, str]],
    sampling: Mapping[str, Any],
    sample_index: int,
) -> str:
    document = {
        "v": KEY_VERSION,
        "model": model_id,
        "messages": [dict(m) for m in messages],
        # None means "provider default"; dropping it keeps the key stable when a new sampling
        # parameter is added with a None default.
        "sampling": {k: v for k, v in sorted(sampling.items()) if v is not None},
        "sample_index": sample_index,
    }
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class CachedResponse:
    key: str
    response: dict[str, Any]
    created_at: float


class ResponseCache:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connection() as conn:
            conn.execute(_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # A generous busy timeout: writers from other processes hold the lock briefly.
            conn = sqlite3.connect(self.path, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> CachedResponse | None:
        row = self._connection().execute(
            "SELECT response, created_at FROM responses WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        return CachedResponse(key, json.loads(row[0]), row[1])

    def put(self, key: str, model_id: str, request: Mapping[str, Any],
            response: Mapping[str, Any]) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO responses (key, model, created_at, request, response) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, model_id, time.time(), json.dumps(request, sort_keys=True),
                 json.dumps(response, sort_keys=True)),
            )

    def __len__(self) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
