"""The child's launch counter also keeps the autotuners it saw: it can make them tune again and say
what each one chose (a reference timed against itself differs when the two sides choose apart)."""

from kernelwright.judge.sandbox.launches import LaunchCounter


class FakeTuner:
    def __init__(self, name, best):
        def kernel():
            pass

        kernel.__name__ = name
        self.base_fn = kernel
        self.cache = {("key",): best} if best else {}
        self.best_config = best


def test_choices_are_reported_and_forgotten():
    counter = LaunchCounter(None)
    tuners = [FakeTuner("matmul_kernel", "BLOCK_M: 128, num_warps: 8"), FakeTuner("untuned_kernel", None)]
    for t in tuners:
        counter.autotuners.add(t)
    assert counter.tuned_configs() == {"matmul_kernel": "BLOCK_M: 128, num_warps: 8"}
    assert counter.forget_tuning() == 2
    assert tuners[0].cache == {}
