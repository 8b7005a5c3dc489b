"""GPU detection and overrides, the spec block and the Triton guide for the prompt."""

from pathlib import Path

import pytest

from kernelwright.agent import knowledge
from kernelwright.agent.knowledge import (KNOWLEDGE_DIR, detect_gpu, gpu_overrides, gpu_spec_text,
                                          knowledge_text, normalize_backend, triton_guide)
from kernelwright.config import ConfigError, load_config
from kernelwright.judge.common.hardware import SPECS, spec_for


def config_with(tmp_path: Path, text: str):
    path = tmp_path / "kernelwright.toml"
    path.write_text(text)
    return load_config(path, env={})


@pytest.fixture
def no_config(tmp_path, monkeypatch):
    """No kernelwright.toml in reach, and no local GPU tools."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNELWRIGHT_CONFIG", raising=False)
    monkeypatch.delenv("KERNELWRIGHT_GPU", raising=False)
    monkeypatch.setattr(knowledge, "_run", lambda cmd: "")


# -- detection -------------------------------------------------------------------------------
def test_detect_from_the_pools_device_info(no_config):
    # as a worker reported it on the project's H200
    info = {"device": "cuda", "name": "NVIDIA H200", "backend": "cuda", "l2_bytes": 62914560,
            "memory_bytes": 150109880320, "sm_count": 132, "torch": "2.11", "triton": "3.6"}
    spec = detect_gpu(info)
    assert spec is spec_for("NVIDIA H200")  # the measured figures agree with the table
    assert spec.name == "NVIDIA H200" and spec.sm_count == 132 and spec.l2_mb == 60


def test_detect_from_a_name_string(no_config):
    assert detect_gpu("AMD Instinct MI300X").name == "AMD Instinct MI300X"
    assert detect_gpu("NVIDIA H100 PCIe").name == "NVIDIA H100 PCIe"


def test_cpu_interpreter_and_unknown_devices_give_none(no_config):
    assert detect_gpu({"name": "cpu (Triton interpreter)", "backend": "cpu", "l2_bytes": 0}) is None
    assert detect_gpu({"name": "Some Future GPU", "backend": "cuda"}) is None
    assert detect_gpu(None) is None  # no GPU tools on this machine


def test_the_devices_own_sm_count_wins(no_config):
    spec = detect_gpu({"name": "NVIDIA H100 80GB HBM3", "backend": "cuda", "sm_count": 66})  # a MIG slice
    assert spec.sm_count == 66 and "reported by the device" in spec.source_of("sm_count")
    assert spec_for("NVIDIA H100 80GB HBM3").sm_count == 132  # the table is unchanged


def test_the_devices_own_l2_wins_on_nvidia_only(no_config):
    spec = detect_gpu({"name": "NVIDIA H100 80GB HBM3", "backend": "cuda", "l2_bytes": 52428800})
    assert spec is spec_for("NVIDIA H100 80GB HBM3") and spec.l2_mb == 50
    spec = detect_gpu({"name": "NVIDIA A100-SXM4-80GB", "backend": "cuda", "l2_bytes": 41943040 // 2})
    assert spec.l2_mb == 20 and "reported by the device" in spec.source_of("l2_mb")
    # ROCm reports one XCD's L2 (4 MB on MI300X): the table's total stays
    assert detect_gpu({"name": "AMD Instinct MI300X", "backend": "hip", "l2_bytes": 4194304}).l2_mb == 32


def test_unrecognised_name_falls_back_on_cu_count_and_memory(no_config):
    spec = detect_gpu({"name": "", "backend": "hip", "sm_count": 304, "memory_bytes": 256 * 10**9})
    assert spec.name == "AMD Instinct MI325X"
    assert detect_gpu({"name": "", "backend": "hip", "sm_count": 304, "memory_bytes": 192 * 10**9}).name \
        == "AMD Instinct MI300X"
    assert detect_gpu({"name": "", "backend": "cuda", "sm_count": 7, "memory_bytes": 10**9}) is None


def test_local_detection_uses_nvidia_smi_without_touching_cuda(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(knowledge, "_run", lambda cmd: "NVIDIA H200\n" if cmd[0] == "nvidia-smi" else "")
    assert detect_gpu().name == "NVIDIA H200"


def test_local_detection_reads_rocm_smi(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = "GPU[0]\t\t: Card Series: \t\tAMD Instinct MI300X OAM\nGPU[0]\t\t: Card Vendor: AMD\n"
    monkeypatch.setattr(knowledge, "_run", lambda cmd: out if cmd[0] == "rocm-smi" else "")
    assert detect_gpu().name == "AMD Instinct MI300X"


# -- overrides -------------------------------------------------------------------------------
def test_config_forces_a_gpu(tmp_path, no_config):
    config = config_with(tmp_path, '[gpu]\nname = "AMD Instinct MI355X"\n')
    assert detect_gpu({"name": "NVIDIA H200", "backend": "cuda"}, config=config).name == "AMD Instinct MI355X"
    assert detect_gpu(None, config=config).name == "AMD Instinct MI355X"


def test_config_path_is_read(tmp_path, no_config):
    path = tmp_path / "other.toml"
    path.write_text('[gpu]\nbandwidth_tbs = 4.0\n')
    assert detect_gpu("NVIDIA H200", config_path=path).bandwidth_tbs == 4.0


def test_kernelwright_toml_in_the_working_directory_is_found(tmp_path, no_config):
    (tmp_path / "kernelwright.toml").write_text('[gpu]\nsm_count = 100\n')
    assert detect_gpu("NVIDIA H200").sm_count == 100
    assert detect_gpu("NVIDIA H200", use_config=False).sm_count == 132


def test_config_overrides_single_figures_and_tflops(tmp_path, no_config):
    config = config_with(tmp_path, '[gpu]\nbandwidth_tbs = 4.5\nsm_count = 130\nl2_mb = 40\n'
                                   '[gpu.tflops]\nbf16 = 900\n')
    spec = detect_gpu("NVIDIA H200", config=config)
    assert (spec.bandwidth_tbs, spec.sm_count, spec.l2_mb) == (4.5, 130, 40)
    assert spec.tflops["bfloat16"] == 900 and spec.tflops["float16"] == 989
    assert "override" in spec.source_of("bandwidth_tbs")
    assert gpu_overrides(config) == {"bandwidth_tbs": 4.5, "sm_count": 130, "l2_mb": 40.0,
                                     "tflops": {"bfloat16": 900.0}}


def test_environment_variable_forces_a_gpu(tmp_path, no_config):
    config = load_config(None, env={"KERNELWRIGHT_GPU": "NVIDIA B200"})
    assert detect_gpu("NVIDIA H200", config=config).name == "NVIDIA B200"


def test_custom_gpu_from_the_config(tmp_path, no_config):
    config = config_with(tmp_path, '[gpu]\nname = "Lab GPU"\nbandwidth_tbs = 1.5\nsm_count = 80\n'
                                   '[gpu.tflops]\nfp16 = 200\nfp32 = 50\n')
    spec = detect_gpu(None, config=config)
    assert spec.name == "Lab GPU" and spec.bandwidth_tbs == 1.5 and spec.sm_count == 80
    assert spec.peak_tflops("float16") == 200


def test_unknown_forced_name_without_figures_is_a_config_error(tmp_path, no_config):
    config = config_with(tmp_path, '[gpu]\nname = "H9000"\n')
    with pytest.raises(ConfigError, match="not in the GPU table"):
        detect_gpu(None, config=config)


def test_typo_in_the_gpu_section_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="bandwidth_tbs"):
        config_with(tmp_path, '[gpu]\nbandwith_tbs = 4.5\n')


def test_gpu_settings_show_in_the_config_listing(tmp_path):
    merged = config_with(tmp_path, '[gpu]\nname = "NVIDIA H200"\n[gpu.tflops]\nfp16 = 900\n').as_dict()
    assert merged["gpu.name"]["value"] == "NVIDIA H200" and merged["gpu.name"]["source"].startswith("file")
    assert merged["gpu.tflops.fp16"]["value"] == 900


def test_kernelwright_config_command_still_works(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from kernelwright.cli import app

    (tmp_path / "kernelwright.toml").write_text('[gpu]\nname = "NVIDIA H200"\nsm_count = 130\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["config", "--json"])
    assert result.exit_code == 0, result.output


# -- text ------------------------------------------------------------------------------------
def test_spec_text_for_nvidia_has_the_figures_with_units():
    text = gpu_spec_text(spec_for("NVIDIA H200"))
    for part in ("NVIDIA H200", "sm_90", "132 SMs", "warp size 32", "227 KB per block", "L2 60 MB",
                 "141 GB HBM3e", "4.8 TB/s", "FP16 989", "BF16 989", "FP8 1,979", "INT8 1,979 TOP/s",
                 "TFLOP/s", "FLOP/byte"):
        assert part in text, part
    assert "http" not in text  # sources stay out of the prompt


def test_spec_text_for_amd_speaks_of_cus_wavefronts_lds_and_infinity_cache():
    text = gpu_spec_text(spec_for("AMD Instinct MI300X"))
    for part in ("gfx942", "304 CUs", "wavefront size 64", "LDS up to 64 KB per workgroup", "VGPR file 512 KB",
                 "Infinity Cache 256 MB", "5.3 TB/s", "FP16 1,307"):
        assert part in text, part


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_spec_text_renders_every_entry(spec):
    text = gpu_spec_text(spec)
    assert spec.name in text and "TB/s" in text and len(text.splitlines()) <= 9


def test_spec_text_for_an_unknown_gpu():
    assert "Unknown GPU" in gpu_spec_text(None)


@pytest.mark.parametrize("backend,kind", [("cuda", "nvidia"), ("NVIDIA", "nvidia"), ("sm_90", "nvidia"),
                                          ("hip", "amd"), ("rocm", "amd"), ("gfx942", "amd"),
                                          ("AMD Instinct MI300X", "amd"), ("cpu", "cpu"), ("", ""), (None, "")])
def test_backend_names(backend, kind):
    assert normalize_backend(backend) == kind


def test_guide_picks_the_backend_section():
    nvidia, amd = triton_guide("cuda"), triton_guide("hip")
    assert "## NVIDIA specifics" in nvidia and "## AMD specifics" not in nvidia
    assert "## AMD specifics" in amd and "## NVIDIA specifics" not in amd
    both = triton_guide(None)
    assert "## NVIDIA specifics" in both and "## AMD specifics" in both
    assert "CPU interpreter" in triton_guide("cpu") and "## AMD specifics" not in triton_guide("cpu")


def test_guide_covers_the_essentials():
    common = triton_guide("cuda")
    for topic in ("other=", "tl.constexpr", "power of two", "tl.dot", "input_precision", "@triton.autotune",
                  "key=", "Conflicting meta-parameters", "triton.cdiv", "tl.num_programs", "persistent",
                  "num_warps", "num_stages", "tl.int64", "online", "torch.empty_like", "contiguous",
                  "fallback", "out of resources", "stride"):
        assert topic in common, topic
    amd = triton_guide("hip")
    for topic in ("wavefront", "64", "waves_per_eu", "matrix_instr_nonkdim", "num_stages", "LDS", "XCD"):
        assert topic in amd, topic


def test_guide_length_is_bounded():
    lines = sum(len(p.read_text().splitlines()) for p in KNOWLEDGE_DIR.glob("*.md"))
    assert 100 <= lines <= 250


def test_knowledge_text_combines_spec_and_guide():
    spec = spec_for("AMD Instinct MI355X")
    text = knowledge_text("hip", spec)
    assert text.startswith("### Target GPU: AMD Instinct MI355X") and "## AMD specifics" in text
    assert "## AMD specifics" in knowledge_text("", spec)  # the backend follows the spec's vendor
    assert "Unknown GPU" in knowledge_text("cuda", None) and "## NVIDIA specifics" in knowledge_text("cuda", None)


def test_docs_table_is_current():
    from kernelwright.agent.knowledge import gpu_table_markdown

    docs = (Path(__file__).resolve().parents[2] / "docs" / "knowledge.md").read_text()
    start, end = docs.index("<!-- gpu-table -->\n") + len("<!-- gpu-table -->\n"), docs.index("<!-- /gpu-table -->")
    assert docs[start:end].strip() == gpu_table_markdown().strip(), \
        "regenerate the table in docs/knowledge.md from gpu_table_markdown()"
