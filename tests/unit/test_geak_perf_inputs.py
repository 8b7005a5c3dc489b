"""GEAK perf-script inputs built one case at a time (suites/geak_perf_inputs.py)."""

import pytest
import torch

from kernelwright.suites import geak_perf_inputs as gpi


class Script:
    """A perf script in GEAK's style: one appended entry per case, made on the CPU."""

    def __init__(self, sizes=(4, 8, 16), shared=False, data_dependent=False, all_at_once=False):
        self.sizes, self.shared, self.data_dependent, self.all_at_once = sizes, shared, data_dependent, all_at_once
        self.cases_started = []

    def get_input_tensors(self):
        self.input_tensors = []
        weight = torch.rand(4) if self.shared else None
        if self.all_at_once:
            self.input_tensors = [(torch.rand(n),) for n in self.sizes]
            return
        for i, n in enumerate(self.sizes):
            self.cases_started.append(i)
            x = torch.rand(n, 4)
            if self.data_dependent:
                n = int(x.sum().item()) % 3 + 1  # needs real values in every case's window
            lengths = torch.tensor([n, n])  # small: stays where the script makes it
            self.input_tensors.append((x * (weight if weight is not None else 1), lengths))
        self.finished = True


@pytest.mark.slow
def test_count_inputs_builds_nothing_and_sees_whether_cases_are_appended_one_by_one():
    inputs, one_by_one = gpi.count_inputs(Script())
    assert [t[0].shape for t in inputs] == [(4, 4), (8, 4), (16, 4)]
    assert all(t[0].device.type == "meta" for t in inputs) and one_by_one
    assert gpi.count_inputs(Script(all_at_once=True))[1] is False
    assert gpi.count_inputs(Script(sizes=(4,), all_at_once=True))[1] is True  # one case: nothing to split


def test_one_case_builds_only_that_case_and_stops_the_script():
    script = Script()
    torch.manual_seed(0)
    x, lengths = gpi.one_case(script, 1, "cpu")
    assert x.shape == (8, 4) and x.device.type == "cpu" and lengths.tolist() == [8, 8]
    assert not hasattr(script, "finished")  # stopped at case 2's first tensor
    assert script.input_tensors == []  # nothing else kept alive


def test_the_same_case_gets_the_same_values_whatever_ran_before():
    script = Script()
    torch.manual_seed(0)
    first = gpi.one_case(script, 2, "cpu")[0]
    torch.manual_seed(0)
    gpi.one_case(script, 0, "cpu")
    torch.rand(100)  # other draws in between
    torch.manual_seed(0)
    again = gpi.one_case(script, 2, "cpu")[0]
    assert torch.equal(first, again)


def test_large_tensors_go_to_the_device_and_small_ones_stay_where_the_script_asks(monkeypatch):
    monkeypatch.setattr(gpi, "LARGE_BYTES", 64)  # a 8x4 float tensor (128 bytes) counts as large
    script = Script()
    script.input_tensors = []
    with gpi._make_mode(script, 1, "meta"):  # "meta" stands in for the GPU here
        try:
            script.get_input_tensors()
        except gpi._CaseDone:
            pass
    x, lengths = script.input_tensors[1]
    assert x.device.type == "meta"  # built on the device
    assert lengths.device.type == "cpu" and lengths.tolist() == [8, 8]  # small: built where asked


class SharedInput(Script):
    def get_input_tensors(self):
        self.input_tensors = []
        weight = torch.rand(4)  # made once, before the first case, and part of every case
        for n in self.sizes:
            self.input_tensors.append((torch.rand(n), weight))


@pytest.mark.parametrize("script, why", [
    (SharedInput(), "made before its window"),
    (Script(shared=True), "RuntimeError: Tensor on device meta"),  # mixed with a meta tensor
    (Script(data_dependent=True), "RuntimeError"),  # .item() of a tensor of an earlier window
])
def test_scripts_it_cannot_follow_are_refused_so_the_caller_builds_them_eagerly(script, why):
    assert gpi.one_case(script, 0, "cpu")[0].shape[0] == 4  # the first case has no earlier window
    with pytest.raises(gpi.Unfollowable, match=why):
        gpi.one_case(script, 1, "cpu")


def test_a_script_that_swallows_exceptions_is_still_stopped():
    class Swallowing(Script):
        def get_input_tensors(self):
            self.input_tensors = []
            for n in self.sizes:
                try:
                    self.input_tensors.append(torch.rand(n))
                except Exception:  # noqa: BLE001 - what a careless script does
                    pass
            self.finished = True

    script = Swallowing()
    assert gpi.one_case(script, 0, "cpu").shape == (4,)
    assert not hasattr(script, "finished")


def test_uninitialised_inputs_of_the_case_are_zeroed_as_fresh_cpu_pages_were():
    class EmptyTable(Script):
        def get_input_tensors(self):
            self.input_tensors = []
            for n in self.sizes:
                table = torch.empty(n, 1024, dtype=torch.int32)  # an index table the script never fills
                self.input_tensors.append((torch.rand(n).normal_(), table, torch.empty_like(table)))

    for _ in range(3):  # reused allocator blocks would hold the previous round's values
        x, table, like = gpi.one_case(EmptyTable(), 2, "cpu")
        assert table.shape == (16, 1024) and not table.any() and not like.any()
        table.fill_(-1)
        like.fill_(-1)


@pytest.mark.gpu
def test_on_the_gpu_large_inputs_are_built_there_and_small_ones_where_asked():
    class Mixed(Script):
        def get_input_tensors(self):
            self.input_tensors = []
            for n in (1 << 16, 1 << 20):
                big = torch.rand(n)  # 4 MiB at the second case: built on the GPU
                table = torch.empty(n, dtype=torch.int32)  # never filled by the script: zeroed
                self.input_tensors.append((big, table, torch.tensor([n])))

    torch.manual_seed(0)
    big, table, lengths = gpi.one_case(Mixed(), 1, "cuda")
    assert big.device.type == "cuda" and table.device.type == "cuda" and not table.any()
    assert lengths.device.type == "cpu" and lengths.tolist() == [1 << 20]


def test_a_script_too_costly_to_replay_is_built_its_own_way(monkeypatch):
    monkeypatch.setattr(gpi, "MAX_REPLAY_CALLS", 10)
    assert gpi.count_inputs(Script(sizes=(4, 8)))[1] is True  # a few calls per case
    assert gpi.count_inputs(Script(sizes=tuple(range(1, 9))))[1] is False  # 3 per case, 8 cases


def test_the_per_process_check_stops_counting_once_the_answer_is_known(monkeypatch):
    monkeypatch.setattr(gpi, "MAX_REPLAY_CALLS", 10)
    script = Script(sizes=tuple(range(1, 9)))
    assert gpi.suits_one_case(script) is False
    assert script.cases_started[-1] < 7 and script.input_tensors == []  # stopped early, nothing kept
    assert gpi.suits_one_case(Script(sizes=(4, 8))) is True
    assert gpi.suits_one_case(Script(all_at_once=True)) is False
