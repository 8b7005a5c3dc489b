"""Settings precedence with provenance (`kernelwright config --json`), model naming, early
failures on missing keys, and `kernelwright doctor` against the scripted server."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kernelwright.cli import app
from kernelwright.config import ConfigError, load_config
from kernelwright.llm import (
    LLMClient, LLMConfigError, LLMSettings, ProviderSettings, parse_model, preflight,
)
from kernelwright.llm.preflight import PreflightError

runner = CliRunner(env={"COLUMNS": "200"})  # wide enough that rich wraps nothing

CONFIG_FILE = """
[llm]
model = "openai/gpt-4.1"
timeout_s = 30
max_concurrency = 3

[llm.openai]
api_key = "sk-file-key-0123456789"

[llm.prices."openai-compatible/qwen"]
input = 0.1
output = 0.2

[judge]
anything = "belongs to another module"
"""


def config_json(*args: str, env: dict[str, str] | None = None) -> dict:
    result = runner.invoke(app, ["config", "--json", *args], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_flag_beats_env_beats_file_beats_default(tmp_path):
    (tmp_path / "kernelwright.toml").write_text(CONFIG_FILE)
    env = {"KERNELWRIGHT_LLM_TIMEOUT_S": "45", "KERNELWRIGHT_MODEL": "anthropic/claude-haiku-4-5"}

    shown = config_json("--model", "openai-compatible/qwen", "--base-url", "http://gpu:8000/v1",
                        env=env)

    assert shown["llm.model"] == {"value": "openai-compatible/qwen", "source": "flag (--model)"}
    assert shown["llm.base_url"]["source"] == "flag (--base-url)"
    assert shown["llm.timeout_s"] == {"value": 45.0, "source": "env (KERNELWRIGHT_LLM_TIMEOUT_S)"}
    file_source = f"file ({tmp_path / 'kernelwright.toml'})"
    assert shown["llm.max_concurrency"] == {"value": 3, "source": file_source}
    assert shown["llm.max_retries"] == {"value": 6, "source": "default"}
    assert shown["llm.prices.openai-compatible/qwen"]["value"] == {"input": 0.1, "output": 0.2}


def test_secrets_are_masked_and_env_keys_override_file_keys(tmp_path):
    (tmp_path / "kernelwright.toml").write_text(CONFIG_FILE)

    from_file = config_json()["llm.openai.api_key"]
    from_env = config_json(env={"OPENAI_API_KEY": "sk-env-key-9876543210"})["llm.openai.api_key"]

    assert from_file["value"] == "sk-…6789" and from_file["source"].startswith("file")
    assert from_env == {"value": "sk-…3210", "source": "env (OPENAI_API_KEY)"}


def test_no_cache_flag_and_explicit_config_path(tmp_path):
    path = tmp_path / "elsewhere.toml"
    path.write_text("[llm]\ncache = true\n")

    shown = config_json("--config", str(path), "--no-cache")

    assert shown["llm.cache"] == {"value": False, "source": "flag (--no-cache)"}


def test_human_readable_table_names_the_sources(tmp_path):
    (tmp_path / "kernelwright.toml").write_text(CONFIG_FILE)

    result = runner.invoke(app, ["config"], env={"KERNELWRIGHT_CACHE_DIR": str(tmp_path)})

    assert result.exit_code == 0
    assert "env (KERNELWRIGHT_CACHE_DIR)" in result.output
    assert "openai/gpt-4.1" in result.output
    assert "llm.openai.api_key" in result.output  # the provider in use
    assert "llm.deepseek.api_key" not in result.output  # providers not in use: only with --all
    assert "llm.deepseek.api_key" in runner.invoke(app, ["config", "--all"]).output


@pytest.mark.parametrize("content, message", [
    ("[llm]\ntimout_s = 3\n", "unknown setting 'llm.timout_s'; did you mean 'llm.timeout_s'"),
    ("[llm]\ntimeout_s = 'soon'\n", "expected float for llm.timeout_s"),
    ("[llm\n", "not valid TOML"),
])
def test_bad_config_files_are_reported(tmp_path, content, message):
    (tmp_path / "kernelwright.toml").write_text(content)

    with pytest.raises(ConfigError, match=message):
        load_config()
    result = runner.invoke(app, ["config"])
    assert result.exit_code == 2 and "error" in result.output


def test_bad_env_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE", "maybe")

    with pytest.raises(ConfigError, match=r"\$KERNELWRIGHT_CACHE: expected bool"):
        load_config()


def test_settings_from_config_reach_the_client(tmp_path):
    (tmp_path / "kernelwright.toml").write_text(CONFIG_FILE)

    client = LLMClient.from_config(load_config(), ledger=None)

    assert client.model.id == "openai/gpt-4.1"
    assert client.endpoint.api_key == "sk-file-key-0123456789"
    assert client.endpoint.max_concurrency == 3
    assert client.settings.timeout_s == 30.0


@pytest.mark.parametrize("name, message", [
    ("gpt-4.1", "must be written provider/model"),
    ("openia/gpt-4.1", "unknown provider 'openia'.*known providers: openai, anthropic, openai-compatible"),
])
def test_model_names_are_checked(name, message):
    with pytest.raises(LLMConfigError, match=message):
        parse_model(name)


def test_model_name_may_contain_slashes():
    spec = parse_model("openai-compatible/Qwen/Qwen2.5-Coder-32B-Instruct")

    assert (spec.provider, spec.name) == ("openai-compatible", "Qwen/Qwen2.5-Coder-32B-Instruct")


def test_missing_key_fails_before_any_request(scripted, tmp_path):
    server = scripted({"default": {"content": "ok"}})
    settings = LLMSettings(cache_dir=tmp_path, providers={
        "anthropic": ProviderSettings(base_url=server.anthropic_base_url)})

    with pytest.raises(LLMConfigError, match=r"ANTHROPIC_API_KEY is not set: export it, or put "
                                             r"api_key in \[llm.anthropic\]"):
        LLMClient("anthropic/claude-haiku-4-5", settings)
    assert server.request_count == 0


def test_compatible_server_needs_a_url_but_no_key(tmp_path):
    with pytest.raises(LLMConfigError, match="needs the server's URL: pass --base-url"):
        LLMClient("openai-compatible/qwen", LLMSettings(cache_dir=tmp_path))

    client = LLMClient("ollama/qwen2.5-coder", LLMSettings(cache_dir=tmp_path))
    assert client.endpoint.base_url == "http://localhost:11434/v1"


def test_doctor_checks_the_model_through_the_cli(scripted):
    server = scripted({"default": {"content": "ok"}})

    result = runner.invoke(app, ["doctor", "--no-gpu", "--model", "openai-compatible/qwen",
                                 "--base-url", server.openai_base_url])

    assert result.exit_code == 0, result.output
    assert "model openai-compatible/qwen: answered in" in result.output
    assert "all 1 checks passed" in result.output
    assert server.requests[0].body["max_tokens"] == 16


def test_doctor_fails_with_the_reason_on_a_bad_key(scripted):
    server = scripted({"default": {"status": 401, "message": "bad key"}})

    result = runner.invoke(app, ["doctor", "--no-gpu", "--model", "openai/gpt-4.1"],
                           env={"OPENAI_API_KEY": "sk-wrong", "OPENAI_BASE_URL": server.openai_base_url})

    assert result.exit_code == 1
    assert "rejected the API key" in result.output and "OPENAI_API_KEY" in result.output
    assert server.request_count == 1


def test_doctor_reports_gpu_and_triton(monkeypatch):
    result = runner.invoke(app, ["doctor"])

    assert "gpu:" in result.output and "triton" in result.output
    assert result.exit_code == (0 if "ok   gpu" in result.output else 1)


def test_preflight_raises_listing_failed_checks(scripted, tmp_path):
    server = scripted({"default": {"status": 404, "message": "no such model"}})
    settings = LLMSettings(cache_dir=tmp_path, backoff_base_s=0.001, providers={
        "openai-compatible": ProviderSettings(base_url=server.openai_base_url)})

    with pytest.raises(PreflightError, match="model openai-compatible/nope: .*was not found"):
        preflight("openai-compatible/nope", settings, gpu=False)

    ok_server = scripted({"default": {"content": "ok"}})
    ok_settings = LLMSettings(cache_dir=tmp_path, providers={
        "openai-compatible": ProviderSettings(base_url=ok_server.openai_base_url)})
    (result,) = preflight("openai-compatible/qwen", ok_settings, gpu=False)
    assert result.ok and "answered" in result.detail


def test_preflight_does_not_touch_the_cache(scripted, make_client):
    server = scripted({"default": {"content": "ok"}})
    client = make_client(server)

    preflight(client.model.id, client.settings, gpu=False)
    preflight(client.model.id, client.settings, gpu=False)

    assert server.request_count == 2
    assert len(client.cache) == 0
