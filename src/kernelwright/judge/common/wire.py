"""The private channel's message format: a JSON header plus raw tensor bytes.

Messages from a candidate's process are untrusted, so they are never unpickled: the trusted side
only parses JSON and copies raw bytes into tensors of an allow-listed dtype and a checked size.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

import torch

_DTYPES = {
    name: getattr(torch, name)
    for name in (
        "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
        "float8_e4m3fn", "float8_e5m2", "complex64",
    )
    if hasattr(torch, name)
}
_HEADER = struct.Struct("<Q")
MAX_MESSAGE_BYTES = 16 << 30
# What one child's reply may carry by default; its worker may allow more where the host has the
# memory (`footprint.reply_limit`). A reference whose replies would exceed it reports problem_too_large.
MAX_REPLY_BYTES = 4 << 30
# Tensor bytes start on this boundary in a message, so a received message's tensors can be views
# of it (no copy) with every dtype aligned.
ALIGN = 64
# multiprocessing.Connection's framing (stable since Python 3.8): a signed 4-byte big-endian size,
# or -1 followed by an 8-byte size for messages of 2 GiB and more.
_FRAME_SIZE = struct.Struct("!i")
_FRAME_BIG = struct.Struct("!Q")
# Once a reply has started, the rest must arrive within this much plus a second per this many bytes
# (a child that sends half a message and stops is timed out, not waited for forever).
FRAME_GRACE_S = float(os.environ.get("KERNELWRIGHT_FRAME_GRACE_S", "") or 30.0)  # the variable is for tests
FRAME_BYTES_PER_S = 100 << 20


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class WireError(ValueError):
    """A message that does not follow the format (truncated, oversized, unknown dtype...)."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def encode(obj: Any) -> bytearray:
    """Serialize plain data with tensors inside. Each tensor is copied once, straight into the
    message (from the GPU too, where the copy lands in the message itself rather than in a CPU
    tensor first): outputs of a GiB travel in ROCm's suite."""
    tensors: list[Any] = []
    metas: list[dict[str, Any]] = []

    def walk(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            t = value.detach()
            metas.append({"dtype": dtype_name(t.dtype), "shape": list(t.shape),
                          "nbytes": t.numel() * t.element_size()})
            tensors.append(t)
            return {"__tensor__": len(metas) - 1}
        if isinstance(value, dict):
            return {str(k): walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        return repr(value)  # anything else travels as text, never as an object

    body = json.dumps({"payload": walk(obj), "tensors": metas}).encode()
    offsets, end = _layout(_HEADER.size + len(body), [m["nbytes"] for m in metas])
    message = bytearray(end)
    _HEADER.pack_into(message, 0, len(body))
    message[_HEADER.size:_HEADER.size + len(body)] = body
    view = memoryview(message)
    for t, meta, offset in zip(tensors, metas, offsets):
        if meta["nbytes"]:
            into = torch.frombuffer(view[offset:offset + meta["nbytes"]], dtype=torch.uint8)
            into.view(t.dtype).view(t.shape).copy_(t)  # any layout, any device: one copy
    return message


def _layout(body_end: int, sizes: list[int]) -> tuple[list[int], int]:
    """Where each tensor's bytes start (each on an `ALIGN` boundary) and where the message ends."""
    offsets, offset = [], _aligned(body_end)
    for nbytes in sizes:
        offsets.append(offset)
        offset = _aligned(offset + nbytes)
    return offsets, offset


def decode(data: bytes | bytearray, share: bool = False) -> Any:
    """Parse a message made by `encode`, validating every size before touching the bytes. Tensors
    are copies, or with `share` (a `bytearray` the caller hands over, as `read_frame` returns)
    views of the message itself: a GiB output is not copied again."""
    body_len, metas, payload = _header(data)
    described = [_described(meta) for meta in metas]
    # encode's layout, worked out again from the sizes, must account for the message exactly
    offsets, end = _layout(_HEADER.size + body_len, [nbytes for _, _, nbytes in described])
    if end != len(data):
        raise WireError("tensor size does not match its description (message length differs)")
    shared = share and isinstance(data, bytearray)
    tensors = []
    for (dtype, shape, nbytes), offset in zip(described, offsets):
        if nbytes == 0:
            tensors.append(torch.empty(shape, dtype=dtype))
        else:
            view = memoryview(data)[offset : offset + nbytes]
            raw = view if shared else bytearray(view)  # writable either way
            tensors.append(torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape))
    try:
        return _unwalk(payload, tensors)
    except RecursionError:
        raise WireError("message nested too deeply") from None


def _header(data: bytes | bytearray) -> tuple[int, list[dict], Any]:
    """(JSON header length, tensor descriptions, payload) of a message, validated."""
    if len(data) < _HEADER.size:
        raise WireError("message shorter than its header")
    (body_len,) = _HEADER.unpack_from(data)
    if body_len > len(data) - _HEADER.size:
        raise WireError("header claims more bytes than the message holds")
    try:
        header = json.loads(data[_HEADER.size : _HEADER.size + body_len])
        metas = header["tensors"]
        payload = header["payload"]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise WireError(f"bad message header: {type(exc).__name__}") from None
    if not isinstance(metas, list) or not all(isinstance(m, dict) for m in metas):
        raise WireError("bad message header: 'tensors' must be a list of objects")
    return body_len, metas, payload


def _described(meta: dict) -> tuple[torch.dtype, list[int], int]:
    """(dtype, shape, bytes) of one tensor description, its size checked against its shape."""
    try:
        dtype = _DTYPES[meta["dtype"]]
        shape = [int(d) for d in meta["shape"]]
        nbytes = int(meta["nbytes"])
    except (KeyError, TypeError, ValueError):
        raise WireError(f"bad tensor description {meta!r}") from None
    numel = 1
    for d in shape:
        if d < 0:
            raise WireError("negative dimension")
        numel *= d
    if nbytes != numel * torch.empty((), dtype=dtype).element_size():
        raise WireError("tensor size does not match its description")
    return dtype, shape, nbytes


def _unwalk(value: Any, tensors: list[torch.Tensor]) -> Any:
    """The payload with each {"__tensor__": i} replaced by tensor i."""
    if isinstance(value, dict):
        if set(value) == {"__tensor__"}:
            index = value["__tensor__"]
            if not isinstance(index, int) or not 0 <= index < len(tensors):
                raise WireError("tensor reference out of range")
            return tensors[index]
        return {k: _unwalk(v, tensors) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwalk(v, tensors) for v in value]
    return value


class FrameTooLarge(WireError):
    """A frame announced as larger than the reader accepts."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a reply of {size} bytes (at most {limit})")
        self.size, self.limit = size, limit


class FrameTimeout(WireError):
    """A reply that started and then stopped arriving."""


def read_frame(fd: int, max_bytes: int) -> bytearray:
    """Read one `Connection.send_bytes` frame from `fd` straight into one buffer (the stock
    `recv_bytes` grows a BytesIO and copies it out: three copies of a GiB output instead of one).
    Call it once `fd` is readable. Raises EOFError when the peer is gone, WireError for a size over
    `max_bytes`, FrameTimeout when the rest of a started frame does not come in time."""
    started = time.monotonic()
    head = _read_exact(fd, bytearray(_FRAME_SIZE.size), started + FRAME_GRACE_S)
    (size,) = _FRAME_SIZE.unpack(head)
    if size == -1:
        (size,) = _FRAME_BIG.unpack(_read_exact(fd, bytearray(_FRAME_BIG.size), started + FRAME_GRACE_S))
    if not 0 <= size <= max_bytes:
        raise FrameTooLarge(size, max_bytes)
    return _read_exact(fd, bytearray(size), started + FRAME_GRACE_S + size / FRAME_BYTES_PER_S)


def _read_exact(fd: int, buffer: bytearray, deadline: float) -> bytearray:
    view, got = memoryview(buffer), 0
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while got < len(buffer):
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            raise FrameTimeout(f"the reply stopped after {got} of {len(buffer)} bytes")
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise EOFError("the peer closed the channel inside a reply")
        got += n
    return buffer
