"""Every KERNELWRIGHT_* number knob parses and fails the same way."""

import pytest

from kernelwright.judge.common.knobs import env_numbers


def test_unset_or_empty_gives_the_default(monkeypatch):
    monkeypatch.delenv("KERNELWRIGHT_TEST_KNOB", raising=False)
    assert env_numbers("KERNELWRIGHT_TEST_KNOB", (3.0, 12.0), 0, 100) == (3.0, 12.0)
    monkeypatch.setenv("KERNELWRIGHT_TEST_KNOB", "  ")
    assert env_numbers("KERNELWRIGHT_TEST_KNOB", (2.0,), 0, 600) == (2.0,)


def test_values_in_range_are_read(monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_TEST_KNOB", "5,25")
    assert env_numbers("KERNELWRIGHT_TEST_KNOB", (3.0, 12.0), 0, 1000, low_open=True) == (5.0, 25.0)
    monkeypatch.setenv("KERNELWRIGHT_TEST_KNOB", "0")
    assert env_numbers("KERNELWRIGHT_TEST_KNOB", (2.0,), 0, 600) == (0.0,)  # a closed bound admits it
    monkeypatch.setenv("KERNELWRIGHT_TEST_KNOB", "4")
    assert env_numbers("KERNELWRIGHT_TEST_KNOB", (8,), 1, 256, whole=True) == (4,)


@pytest.mark.parametrize("raw, default, kwargs", [
    ("0,10", (3.0, 12.0), {"low_open": True}),   # the open bound refuses it
    ("10", (3.0, 12.0), {}),                      # too few
    ("1,2,3", (3.0, 12.0), {}),                   # too many
    ("a,b", (3.0, 12.0), {}),
    ("1.5", (8,), {"whole": True}),
    ("5000", (2.0,), {}),
    ("-1", (2.0,), {}),
])
def test_anything_else_names_the_variable_the_range_and_an_example(monkeypatch, raw, default, kwargs):
    monkeypatch.setenv("KERNELWRIGHT_TEST_KNOB", raw)
    with pytest.raises(ValueError, match=r"KERNELWRIGHT_TEST_KNOB must be .* to 1000 .*\(e\.g\. .*\), got"):
        env_numbers("KERNELWRIGHT_TEST_KNOB", default, 0, 1000, **kwargs)
