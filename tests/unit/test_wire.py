"""The private channel's format: round trips, and the trusted side's defences against bad bytes."""

import json
import struct

import pytest
import torch

from kernelwright.judge.common.wire import WireError, decode, encode

HEADER = struct.Struct("<Q")


def frame(header: object, tail: bytes = b"") -> bytes:
    """A hand-made message in encode's layout: tensor bytes start and end on 64-byte boundaries."""
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    head = HEADER.pack(len(body)) + body
    head += b"\0" * (-len(head) % 64)
    return head + tail + b"\0" * (-len(tail) % 64) if tail else head


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and (
        a.numel() == 0 or torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))


ALL_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
              torch.int16, torch.int8, torch.uint8, torch.bool]


def sample(dtype: torch.dtype, shape=(3, 5)) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 100).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_round_trip_every_dtype(dtype):
    t = sample(dtype)
    out = decode(encode({"t": t}))["t"]
    assert same(out, t)


def test_round_trip_nested_payload_with_mixed_tensors():
    a = sample(torch.float32, (4, 4))
    payload = {
        "outputs": [a, sample(torch.bfloat16, (2, 3)), (sample(torch.int8, (7,)), sample(torch.bool, (2, 2)))],
        "scalar": torch.tensor(3.5, dtype=torch.float16),            # 0-d
        "empty": torch.empty(0, 4, dtype=torch.float32),             # empty
        "strided": a.t(),                                            # non-contiguous view
        "meta": {"n": 3, "x": 1.25, "ok": True, "none": None, "s": "text", 7: "int key"},
    }
    got = decode(encode(payload))
    assert same(got["outputs"][0], payload["outputs"][0])
    assert same(got["outputs"][1], payload["outputs"][1])
    assert isinstance(got["outputs"][2], list)  # tuples travel as lists
    assert same(got["outputs"][2][0], payload["outputs"][2][0])
    assert same(got["outputs"][2][1], payload["outputs"][2][1])
    assert got["scalar"].shape == () and got["scalar"].dtype == torch.float16 and got["scalar"].item() == 3.5
    assert got["empty"].shape == (0, 4) and got["empty"].dtype == torch.float32
    assert torch.equal(got["strided"], a.t().contiguous())
    assert got["meta"] == {"n": 3, "x": 1.25, "ok": True, "none": None, "s": "text", "7": "int key"}


def test_special_float_values_survive_bitwise():
    t = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-45], dtype=torch.float32)
    assert same(decode(encode(t)), t)


def test_decoded_tensor_owns_writable_memory():
    data = encode([torch.zeros(4)])
    out = decode(data)[0]
    out += 1  # frombuffer over a bytes object would be read-only
    assert decode(data)[0].sum().item() == 0


def test_arbitrary_objects_travel_as_their_repr_not_pickled():
    class Evil:
        def __reduce__(self):  # would run on unpickling
            raise AssertionError("must never be pickled")

        def __repr__(self):
            return "<Evil object>"

    got = decode(encode({"obj": Evil(), "set": {1}, "dtype": torch.float32}))
    assert got == {"obj": "<Evil object>", "set": "{1}", "dtype": "torch.float32"}
    assert b"pickle" not in encode(Evil()) and b"<Evil object>" in encode(Evil())


# --- the trusted side's defences: every malformed message is a WireError -------------------------

def good_message() -> bytes:
    return encode({"x": torch.arange(6, dtype=torch.float32).reshape(2, 3)})


def tensor_message(meta: dict, raw: bytes, payload=None) -> bytes:
    return frame({"payload": payload if payload is not None else {"__tensor__": 0}, "tensors": [meta]}, raw)


BAD_MESSAGES = {
    "empty": b"",
    "shorter_than_header": b"\x01\x02\x03",
    "truncated_tensor_bytes": good_message()[:-1],
    "truncated_json": good_message()[:HEADER.size + 5],
    "header_claims_more_bytes": HEADER.pack(10_000) + b"{}",
    "header_claims_huge_length": HEADER.pack(2**64 - 1) + b"{}",
    "non_json_header": frame(b"this is not json"),
    "non_utf8_header": frame(b"\xff\xfe\x00"),
    "header_missing_tensors": frame({"payload": 1}),
    "header_missing_payload": frame({"tensors": []}),
    "header_is_a_list": frame([1, 2, 3]),
    "unknown_dtype": tensor_message({"dtype": "object", "shape": [1], "nbytes": 8}, b"\0" * 8),
    "dtype_not_a_string": tensor_message({"dtype": ["float32"], "shape": [1], "nbytes": 4}, b"\0" * 4),
    "negative_dimension": tensor_message({"dtype": "float32", "shape": [-1, -4], "nbytes": 16}, b"\0" * 16),
    "nbytes_too_small_for_shape": tensor_message({"dtype": "float32", "shape": [2, 2], "nbytes": 12}, b"\0" * 12),
    "nbytes_too_large_for_shape": tensor_message({"dtype": "float32", "shape": [2], "nbytes": 16}, b"\0" * 16),
    "nbytes_beyond_message": tensor_message({"dtype": "float32", "shape": [32], "nbytes": 128}, b"\0" * 8),
    "shape_not_a_list": tensor_message({"dtype": "float32", "shape": 4, "nbytes": 16}, b"\0" * 16),
    "missing_nbytes": tensor_message({"dtype": "float32", "shape": [1]}, b"\0" * 4),
    "tensor_meta_not_a_dict": frame({"payload": 1, "tensors": ["float32"]}),
    "tensor_reference_out_of_range": tensor_message({"dtype": "float32", "shape": [1], "nbytes": 4}, b"\0" * 4,
                                                    payload={"__tensor__": 1}),
    "tensor_reference_negative": tensor_message({"dtype": "float32", "shape": [1], "nbytes": 4}, b"\0" * 4,
                                                payload=[{"__tensor__": -1}]),
    "tensor_reference_not_int": tensor_message({"dtype": "float32", "shape": [1], "nbytes": 4}, b"\0" * 4,
                                               payload={"a": {"__tensor__": "0"}}),
    "tensor_reference_without_tensors": frame({"payload": {"__tensor__": 0}, "tensors": []}),
}


@pytest.mark.parametrize("data", list(BAD_MESSAGES.values()), ids=list(BAD_MESSAGES))
def test_malformed_message_raises_wire_error_only(data):
    with pytest.raises(WireError):
        decode(data)


def test_wire_error_messages_say_what_is_wrong():
    with pytest.raises(WireError, match="shorter than its header"):
        decode(b"\x00")
    with pytest.raises(WireError, match="claims more bytes"):
        decode(BAD_MESSAGES["header_claims_more_bytes"])
    with pytest.raises(WireError, match="bad message header"):
        decode(BAD_MESSAGES["non_json_header"])
    with pytest.raises(WireError, match="bad tensor description"):
        decode(BAD_MESSAGES["unknown_dtype"])
    with pytest.raises(WireError, match="negative dimension"):
        decode(BAD_MESSAGES["negative_dimension"])
    with pytest.raises(WireError, match="does not match"):
        decode(BAD_MESSAGES["nbytes_too_small_for_shape"])
    with pytest.raises(WireError, match="out of range"):
        decode(BAD_MESSAGES["tensor_reference_out_of_range"])


def test_wire_error_is_a_value_error():
    assert issubclass(WireError, ValueError)


def test_tensors_field_not_a_list_raises_wire_error():
    with pytest.raises(WireError):
        decode(frame({"payload": 1, "tensors": 5}))


def test_deeply_nested_header_raises_wire_error():
    with pytest.raises(WireError):
        decode(frame(b"[" * 200_000 + b"]" * 200_000))


def test_shared_decode_makes_aligned_views_of_the_message():
    payload = {"a": sample(torch.int8, (3,)), "b": sample(torch.float64, (5, 7)), "c": sample(torch.bfloat16, (9,))}
    data = encode(payload)
    got = decode(data, share=True)
    for key in payload:
        assert same(got[key], payload[key])
        assert got[key].data_ptr() % 8 == 0  # every dtype aligned, though "a" is 3 bytes long
    got["b"] += 1  # writable, and a view of `data`: the message buffer is the tensors' memory
    assert same(decode(data)["b"], payload["b"] + 1)


def _pipe():
    import socket

    a, b = socket.socketpair()
    return a, b


def test_read_frame_reads_what_connection_send_bytes_writes():
    from multiprocessing.connection import Connection

    from kernelwright.judge.common.wire import read_frame

    a, b = _pipe()
    sender = Connection(a.detach())
    import threading

    big = encode({"t": torch.arange(3 << 20, dtype=torch.int32)})  # 12 MiB: many socket reads
    small = encode({"op": "gpu_lock", "state": "waiting"})
    thread = threading.Thread(target=lambda: (sender.send_bytes(small), sender.send_bytes(big)))
    thread.start()
    fd = b.fileno()
    assert decode(read_frame(fd, 1 << 30), share=True) == {"op": "gpu_lock", "state": "waiting"}
    got = decode(read_frame(fd, 1 << 30), share=True)["t"]
    thread.join()
    assert torch.equal(got, torch.arange(3 << 20, dtype=torch.int32))
    sender.close()
    with pytest.raises(EOFError):
        read_frame(fd, 1 << 30)
    b.close()


def test_read_frame_refuses_an_oversized_frame_without_reading_it():
    from kernelwright.judge.common.wire import read_frame

    a, b = _pipe()
    a.sendall(struct.pack("!i", -1) + struct.pack("!Q", 5 << 30))
    with pytest.raises(WireError, match="at most"):
        read_frame(b.fileno(), 4 << 30)
    a.close()
    b.close()


def test_half_a_frame_then_silence_times_out(monkeypatch):
    """A child (or the candidate inside it, which can write to the channel) that sends the start
    of a reply and stops must not hold the judge forever."""
    import time

    from kernelwright.judge.common import wire

    monkeypatch.setattr(wire, "FRAME_GRACE_S", 0.3)
    a, b = _pipe()
    a.sendall(struct.pack("!i", 1000) + b"x" * 10)
    start = time.monotonic()
    with pytest.raises(wire.FrameTimeout, match="10 of 1000 bytes"):
        wire.read_frame(b.fileno(), 1 << 20)
    assert time.monotonic() - start < 5
    a.close()
    b.close()
