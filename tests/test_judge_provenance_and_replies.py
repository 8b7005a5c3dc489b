"""Issue 20, items 3 and 5, under the interpreter.

Item 3: a candidate passes only if the tensors it returns were written by its own Triton kernels
(their memory was given to a launch of a kernel defined in its file): a token launch next to a
result computed with torch fails with `output_not_from_kernel`, in a built-in task, in KernelBench
and per test call in TritonBench-T; views of a kernel's buffer and a test's own post-processing of
what the candidate returned still pass.

Item 5: a reply the candidate forges on the judge's channel (wrong types, missing fields, an "ok"
for a request never sent, a reply before any request) is that candidate's `protocol_error`, never
a pass and never a judge error. Failure names come from the benchmark's own result keys."""

import json

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.suites.kernelbench import load_suite as load_kernelbench
from kernelwright.suites.tritonbench_t import DATA_DIR, INSTRUCTION_JSONS, STATS_JSON
from kernelwright.suites.tritonbench_t import load_suite as load_tritonbench_t
from kernelwright.tasks import load_task_file, resolve_task

from .conftest import CANDIDATES, QUICK_PERF, judge_on_cpu
from .test_kernelbench_adapter import CANDIDATE as KB_CANDIDATE
from .test_kernelbench_adapter import REFERENCE_FILE as KB_REFERENCE
from .test_tritonbench_t_adapter import CANDIDATE as TBT_CANDIDATE
from .test_tritonbench_t_adapter import OPERATOR, SEPARATOR, TEST

VECTOR_ADD = CANDIDATES / "vector_add"
HOSTILE = {
    "token_kernel_torch_result": ("correctness", "output_not_from_kernel"),
    "freed_scratch_reused": ("correctness", "output_not_from_kernel"),
    "output_is_view": ("passed", "passed"),
    "forged_reply_wrong_types": ("call", "protocol_error"),
    "forged_reply_missing_fields": ("call", "protocol_error"),
    "forged_ok_reply": ("call", "protocol_error"),
    "forged_ok_reply_numbered": ("correctness", "protocol_error"),
    "unsolicited_reply_at_import": ("call", "protocol_error"),
    "forged_wait_then_hang": ("call", "timeout"),
    "holds_gpu_lock": ("correctness", "gpu_lock_held"),
}


@pytest.fixture(scope="module")
def vector_add_verdicts():
    task = resolve_task("vector_add")
    options = JudgeOptions(seeds=2, seed=11, perf=False, load_timeout=60, call_timeout=8, case_timeout=8)
    with JudgePool("cpu", workers=2, options=options) as pool:
        verdicts = pool.judge_many([(task, VECTOR_ADD / f"{name}.py") for name in HOSTILE])
    return dict(zip(HOSTILE, verdicts))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_candidates_fail_with_the_right_kind(vector_add_verdicts, name):
    verdict = vector_add_verdicts[name]
    assert (verdict.stage, verdict.kind) == HOSTILE[name], f"{name}: {verdict.stage} {verdict.kind}: {verdict.reason}"
    if verdict.kind == "protocol_error":
        assert "unreadable reply" in verdict.reason and "internal judge error" not in verdict.reason


@pytest.mark.slow
def test_a_token_launch_names_the_output_it_did_not_write(vector_add_verdicts):
    reason = vector_add_verdicts["token_kernel_torch_result"].reason
    assert "output was not written by the candidate's own Triton kernels" in reason, reason


@pytest.mark.slow
def test_forged_replies_say_what_was_wrong(vector_add_verdicts):
    assert "outputs: expected a list" in vector_add_verdicts["forged_reply_wrong_types"].reason
    assert "lacks its field" in vector_add_verdicts["forged_reply_missing_fields"].reason
    assert "numbered 999" in vector_add_verdicts["forged_ok_reply"].reason
    # a forged "queueing for the GPU" does not stop the clock: timed out at call_timeout (8 s)
    assert "said it was queueing for the GPU" in vector_add_verdicts["forged_wait_then_hang"].reason


@pytest.mark.slow
def test_a_token_launch_at_perf_size_only_fails_the_perf_check(tmp_path):
    """Honest at the test sizes, torch at the timed ones: the perf-size check catches it."""
    source = (VECTOR_ADD / "token_kernel_torch_result.py").read_text().replace(
        "def vector_add(x, y):\n", "def vector_add(x, y):\n    if x.numel() <= 10_000:  # tiny_add's test sizes\n"
        "        out = torch.empty_like(x)\n        add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)\n"
        "        return out\n")
    path = tmp_path / "cand.py"
    path.write_text(source)
    verdict = judge_on_cpu(load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py"), path, seeds=1, **QUICK_PERF)
    assert (verdict.stage, verdict.kind) == ("performance", "output_not_from_kernel"), verdict.reason
    assert "at perf size" in verdict.reason


# -- KernelBench: a ModelNew that launches its kernel on 16 elements and returns torch's result --
KB_TOKEN = KB_CANDIDATE.replace(
    "        scaled_relu_kernel[(triton.cdiv(n, 64),)](y, out, n, SCALE, BLOCK=64)\n        return out",
    "        token = torch.empty(16, device=y.device)\n"
    "        scaled_relu_kernel[(1,)](y, token, 16, self.scale, BLOCK=16)\n"
    "        return torch.relu(y) * self.scale")


@pytest.fixture(scope="module")
def kernelbench(tmp_path_factory):
    root = tmp_path_factory.mktemp("KernelBench-repo")
    level2 = root / "KernelBench" / "level2"
    level2.mkdir(parents=True)
    (level2 / "7_Linear_ScaledReLU.py").write_text(KB_REFERENCE)
    (root / "token.py").write_text(KB_TOKEN)
    (root / "good.py").write_text(KB_CANDIDATE.replace("SCALE", "self.scale"))
    (task,), _ = load_kernelbench(root)
    return task, root


@pytest.mark.slow
def test_kernelbench_token_launch_fails(kernelbench):
    task, root = kernelbench
    assert "torch.relu(y)" in KB_TOKEN
    verdict = judge_on_cpu(task, root / "token.py", seeds=1, perf=False)
    assert (verdict.stage, verdict.kind) == ("correctness", "output_not_from_kernel"), verdict.reason
    good = judge_on_cpu(task, root / "good.py", seeds=1, perf=False)
    assert good.passed, good.reason


# -- TritonBench-T: Triton for one of the test's calls, torch for the other -------------------
HALF_TRITON = TBT_CANDIDATE.replace("SHIFT", "shift").replace(
    "def shifted_tanh(input, shift=1.0):\n",
    "_calls = [0]\n\n\ndef shifted_tanh(input, shift=1.0):\n"
    "    _calls[0] += 1\n"
    "    if _calls[0] % 2 == 0:  # the test's second call of each run\n"
    "        return torch.tanh(input) + shift\n")
# the test itself moves one result to the host and scales it: what the test does with a result is
# not the candidate's work, so only the call's own return value is checked
POSTPROCESSING_TEST = TEST.replace(
    'results["test_case_2"] = shifted_tanh(torch.randn(3, 7, device=\'cuda\'), shift=-2.0)',
    'results["test_case_2"] = (shifted_tanh(torch.randn(3, 7, device=\'cuda\'), shift=-2.0) * 2.0).cpu()')


def _tritonbench_checkout(root, test: str):
    data = root / DATA_DIR
    data.mkdir(parents=True)
    (data / "shifted_tanh.py").write_text(OPERATOR + SEPARATOR + test)
    description = "Applies tanh to every element of the input and adds a constant shift."
    (root / STATS_JSON).write_text(json.dumps([{"name": "shifted_tanh", "file": "shifted_tanh.py",
                                                 "description": description, "difficulty": 2,
                                                 "func_inputs": "shifted_tanh(input, shift=1.0) -> Tensor"}]))
    instruction = ("Functional Description: " + description +
                   "\nWrapper Entry Information: shifted_tanh(input, shift=1.0) -> Tensor\n")
    (root / INSTRUCTION_JSONS[0]).write_text(json.dumps([{"instruction": instruction, "input": "", "output": ""}]))
    (task,), _ = load_tritonbench_t(root)
    return task


@pytest.mark.slow
def test_tritonbench_t_candidate_must_use_triton_in_every_test_call(tmp_path):
    assert POSTPROCESSING_TEST != TEST
    task = _tritonbench_checkout(tmp_path / "plain", TEST)
    (tmp_path / "half.py").write_text(HALF_TRITON)
    verdict = judge_on_cpu(task, tmp_path / "half.py", seeds=1, perf=False)
    assert (verdict.stage, verdict.kind) == ("correctness", "output_not_from_kernel"), verdict.reason
    assert "call 2 of shifted_tanh" in verdict.reason and "call 1 " not in verdict.reason
    post = _tritonbench_checkout(tmp_path / "post", POSTPROCESSING_TEST)
    (tmp_path / "good.py").write_text(TBT_CANDIDATE.replace("SHIFT", "shift"))
    good = judge_on_cpu(post, tmp_path / "good.py", seeds=1, perf=False)
    assert good.passed, good.reason


@pytest.mark.slow
def test_tritonbench_t_mismatch_names_the_result_key(tmp_path):
    """Issue 18 item 10: 'test_case_1', as the benchmark's test calls it, not 'output 0'."""
    task = _tritonbench_checkout(tmp_path / "plain", TEST)
    (tmp_path / "wrong.py").write_text(TBT_CANDIDATE.replace("SHIFT", "shift + 0.1"))
    verdict = judge_on_cpu(task, tmp_path / "wrong.py", seeds=1, perf=False)
    assert verdict.kind == "wrong_values" and "test_case_1: " in verdict.reason, verdict.reason
    assert "output 0" not in verdict.reason


# -- the typed messages themselves ----------------------------------------------------------
def test_replies_are_checked_against_their_message_kind():
    import torch

    from kernelwright.judge.common.messages import CandidateRun, ErrorReply, MessageError, parse_reply

    good = {"op": "run", "ok": True, "outputs": [torch.ones(2)], "launches": 1, "seconds": 0.5,
            "input_digests": [], "names": ["test_case_1"]}
    reply = parse_reply(good, "run", "candidate")
    assert isinstance(reply, CandidateRun) and reply.launches == 1 and reply.names == ["test_case_1"]
    error = parse_reply({"op": "run", "ok": False, "error": "boom", "error_types": ["builtins.MemoryError"]},
                        "run", "candidate")
    assert isinstance(error, ErrorReply) and error.error_types == ["builtins.MemoryError"]
    bad = [
        ([1, 2], "not an object"),
        (dict(good, op="load"), "'load'"),
        (dict(good, ok="yes"), "'ok'"),
        (dict(good, launches=1.5), "launches: expected an integer"),
        (dict(good, launches=True), "launches: expected an integer"),
        (dict(good, seconds=float("nan")), "seconds: expected a finite number"),
        (dict(good, outputs=[[1.0, 2.0]]), "outputs[0]: expected a tensor"),
        (dict(good, names=["a", "b"]), "2 names for 1 outputs"),
        (dict(good, not_from_kernel=[3]), "an index outside"),
        ({k: v for k, v in good.items() if k != "seconds"}, "lacks its field 'seconds'"),
        ({"op": "run", "ok": False, "error_types": "torch.OutOfMemoryError"}, "error_types: expected a list"),
        ({"op": "run", "ok": True, "skipped": "x"}, "lacks its field"),  # only a reference may skip
    ]
    for raw, message in bad:
        with pytest.raises(MessageError, match=message.replace("[", r"\[").replace("]", r"\]")):
            parse_reply(raw, "run", "candidate")
    spot = {"op": "spot", "ok": True, "samples": [torch.ones(1)], "nan_counts": [0, 0], "launches": 1,
            "meta": [{"dtype": "float32", "shape": [4], "nbytes": 16}]}
    with pytest.raises(MessageError, match="2 nan_counts for 1 meta"):
        parse_reply(spot, "spot", "candidate")
    with pytest.raises(MessageError, match="unknown dtype"):
        parse_reply(dict(spot, nan_counts=[0], meta=[{"dtype": "object", "shape": [4]}]), "spot", "candidate")


def test_kernel_memory_counts_views_and_copies_but_not_computations():
    import torch

    from kernelwright.judge.sandbox.provenance import KernelMemory, tracking_copies

    memory = KernelMemory(torch)
    buffer, other = torch.zeros(8), torch.zeros(8)
    memory.note_launch((buffer[2:], 3), {})
    with tracking_copies(torch, memory):
        copied = buffer.to(torch.float64)
        computed = torch.relu(buffer)
        number = torch.tensor(0.5)
        into = torch.empty(8)
        into.copy_(buffer)
    assert memory.holds(buffer) and memory.holds(buffer.view(2, 4)[1]) and memory.holds(copied)
    assert memory.holds(into) and memory.holds(number) and memory.holds(torch.empty(0))
    assert not memory.holds(other) and not memory.holds(computed)
    assert memory.foreign((buffer, [other, computed])) == ["[1][0]", "[1][1]"]
    scratch = torch.zeros(1 << 16)
    memory.note_launch((scratch,), {})
    address = scratch.data_ptr()
    del scratch
    reused = torch.zeros(1 << 16)  # the allocator may hand back the same addresses
    assert not memory.holds(reused) or reused.data_ptr() != address
