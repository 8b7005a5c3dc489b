"""`kernelwright doctor` lists every GPU it sees by the index `--gpus` takes (issue 33, item 3)."""

from types import SimpleNamespace

import importlib

preflight = importlib.import_module("kernelwright.llm.preflight")  # (the package exports a function of that name)


def fake_torch(names):
    cuda = SimpleNamespace(device_count=lambda: len(names), get_device_name=lambda i: names[i])
    return SimpleNamespace(cuda=cuda, version=SimpleNamespace(hip=None, cuda="12.4"), __version__="2.5")


def test_doctor_lists_each_gpu_by_its_index(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", fake_torch(["NVIDIA H200", "NVIDIA H200", "NVIDIA A100"]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3,5")
    result = preflight.check_device("auto")
    assert result.ok
    assert "3 devices" in result.detail
    assert "0: NVIDIA H200; 1: NVIDIA H200; 2: NVIDIA A100" in result.detail
    assert "CUDA_VISIBLE_DEVICES=1,3,5" in result.detail and "--gpus" in result.detail
