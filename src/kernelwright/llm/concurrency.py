"""Bounded concurrency per provider endpoint, shared by every client in the process.

A rate limit belongs to the provider account (or to the GPUs of a local server), not to one
client object, so all clients reaching the same endpoint draw from one semaphore. The bound
covers requests in flight only: a call waiting out a backoff delay does not hold a slot.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class ConcurrencyLimiter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, tuple[int, threading.BoundedSemaphore]] = {}

    def _semaphore(self, key: str, limit: int) -> threading.BoundedSemaphore:
        with self._lock:
            current = self._slots.get(key)
            # The first client to reach an endpoint sets its bound; a different bound later
            # (a new configuration in the same process) replaces it for new requests.
            if current is None or current[0] != limit:
                current = (limit, threading.BoundedSemaphore(limit))
                self._slots[key] = current
            return current[1]

    @contextmanager
    def slot(self, key: str, limit: int) -> Iterator[None]:
        semaphore = self._semaphore(key, limit)
        with semaphore:
            yield


class KeyedLocks:
    """One lock per key, created on demand and dropped when nobody holds or awaits it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, list[int]]] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.setdefault(key, (threading.Lock(), [0]))
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                users[0] -= 1
                if users[0] == 0:
                    del self._locks[key]


DEFAULT_LIMITER = ConcurrencyLimiter()
SAME_REQUEST_LOCKS = KeyedLocks()  # keyed by cache key: identical requests in this process
