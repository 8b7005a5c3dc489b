"""The private channel's message format: a JSON header plus raw tensor bytes.

Messages from a candidate's process are untrusted, so they are never unpickled: the trusted side
only parses JSON and copies raw bytes into tensors of an allow-listed dtype and a checked size.
"""

from __future__ import annotations

import json
import struct
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
MAX_MESSAGE_BYTES = 8 << 30


class WireError(ValueError):
    """A message that does not follow the format (truncated, oversized, unknown dtype...)."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def encode(obj: Any) -> bytearray:
    """Serialize plain data with tensors inside (tensors are copied to the CPU). Each tensor's
    bytes are copied once, into the message itself: outputs of a GiB travel in ROCm's suite."""
    arrays: list[Any] = []
    metas: list[dict[str, Any]] = []

    def walk(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            t = value.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            t = t.contiguous()
            flat = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else None
            metas.append({"dtype": dtype_name(t.dtype), "shape": list(t.shape),
                          "nbytes": 0 if flat is None else int(flat.nbytes)})
            arrays.append(flat)
            return {"__tensor__": len(metas) - 1}
        if isinstance(value, dict):
            return {str(k): walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        return repr(value)  # anything else travels as text, never as an object

    body = json.dumps({"payload": walk(obj), "tensors": metas}).encode()
    message = bytearray(_HEADER.size + len(body) + sum(m["nbytes"] for m in metas))
    _HEADER.pack_into(message, 0, len(body))
    offset = _HEADER.size + len(body)
    message[_HEADER.size:offset] = body
    view = memoryview(message)
    for flat in arrays:
        if flat is not None:
            view[offset:offset + flat.nbytes] = memoryview(flat)
            offset += flat.nbytes
    return message


def decode(data: bytes) -> Any:
    """Parse a message made by `encode`, validating every size before touching the bytes."""
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
    tensors = []
    offset = _HEADER.size + body_len
    for meta in metas:
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
        if nbytes != numel * torch.empty((), dtype=dtype).element_size() or offset + nbytes > len(data):
            raise WireError("tensor size does not match its description")
        if numel == 0:
            tensors.append(torch.empty(shape, dtype=dtype))
        else:
            raw = bytearray(memoryview(data)[offset : offset + nbytes])  # one copy, writable
            tensors.append(torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape))
        offset += nbytes

    def unwalk(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"__tensor__"}:
                index = value["__tensor__"]
                if not isinstance(index, int) or not 0 <= index < len(tensors):
                    raise WireError("tensor reference out of range")
                return tensors[index]
            return {k: unwalk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [unwalk(v) for v in value]
        return value

    try:
        return unwalk(payload)
    except RecursionError:
        raise WireError("message nested too deeply") from None
