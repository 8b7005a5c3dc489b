"""Project-wide settings, merged from four layers with provenance:

    built-in defaults  <  kernelwright.toml  <  environment variables  <  command-line flags

Each subsystem declares its settings once (`register`) under its own TOML section (`[llm]`,
`[judge]`, ...), with a type, a default, an environment variable and a help line. `load_config`
resolves every registered setting and remembers where each value came from, which is what
`kernelwright config` shows. Free-form tables (such as `[llm.prices]`) are declared with
`register_table` and handed over raw.

The file is found as: the explicit path (`--config`), else `$KERNELWRIGHT_CONFIG`, else
`./kernelwright.toml` if it exists; without one, only the other layers apply.
"""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

CONFIG_FILE_NAME = "kernelwright.toml"
CONFIG_ENV = "KERNELWRIGHT_CONFIG"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConfigError(ValueError):
    """A configuration file, variable or flag that cannot be used as given."""


@dataclass(frozen=True)
class SettingSpec:
    """One setting. `key` is dotted: `llm.openai.api_key` is `api_key` in `[llm.openai]`."""

    key: str
    type: type  # str, int, float, bool or Path
    default: Any
    help: str
    env: str | None = None
    flag: str | None = None  # only for display: the CLI flag that sets it
    secret: bool = False  # shown masked by `kernelwright config`


@dataclass(frozen=True)
class Origin:
    kind: Literal["default", "file", "env", "flag"]
    detail: str = ""  # file path, variable name or flag name

    def __str__(self) -> str:
        return f"{self.kind} ({self.detail})" if self.detail else self.kind


@dataclass(frozen=True)
class ResolvedSetting:
    spec: SettingSpec
    value: Any
    origin: Origin

    def display_value(self, reveal_secrets: bool = False) -> Any:
        if self.spec.secret and self.value and not reveal_secrets:
            return mask_secret(str(self.value))
        if isinstance(self.value, Path):
            return str(self.value)
        return self.value


_SETTINGS: dict[str, SettingSpec] = {}
_TABLES: set[str] = set()


def register(*specs: SettingSpec) -> None:
    """Declare settings. Registering the same key again replaces it (modules may be reloaded)."""
    for spec in specs:
        if "." not in spec.key:
            raise ValueError(f"setting {spec.key!r} must live in a section, e.g. 'llm.{spec.key}'")
        _SETTINGS[spec.key] = spec


def register_table(key: str) -> None:
    """Declare a free-form table (e.g. `llm.prices`) whose contents are not checked here."""
    _TABLES.add(key)


def registered_settings() -> list[SettingSpec]:
    return list(_SETTINGS.values())


# Every module that declares settings (`register`, `register_table`): `kernelwright config` imports
# them all, so that it shows every setting and not only those of the modules a command happened to
# import. A module that is not there (an optional part) is skipped.
SETTING_MODULES = ("kernelwright.llm.settings", "kernelwright.agent.knowledge")


def import_setting_modules() -> None:
    import importlib

    for name in SETTING_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not (exc.name and name.startswith(exc.name)):
                raise  # the module is there but one of its own imports is missing: say so


@dataclass(frozen=True)
class EnvKnob:
    """A setting the judge reads from the environment only (its processes start without the
    config file): shown by `kernelwright config`, set with `export NAME=VALUE`."""

    name: str
    default: str
    help: str


ENV_KNOBS = (
    EnvKnob("KERNELWRIGHT_CONFIG", "./kernelwright.toml if it exists", "the settings file"),
    EnvKnob("KERNELWRIGHT_TRACE", "0", "1: one line per judged item, perf check and timing turn on stderr"),
    EnvKnob("KERNELWRIGHT_COMPILE_THREADS", "half the cores, at most 8",
            "threads that compile an autotuner's configs side by side (1: off)"),
    EnvKnob("KERNELWRIGHT_TUNING_MS", "3,12", "autotuner warm-up,rep milliseconds per config at timing turns"),
    EnvKnob("KERNELWRIGHT_WRITER_PATIENCE_S", "0.5",
            "seconds a timing turn waits for a free moment before pausing other workers' checks"),
    EnvKnob("KERNELWRIGHT_NO_NUDGE", "0", "1: do not signal busy checks to step aside for a timing turn"),
)


def env_knob_values(env: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """{"env.NAME": {"value", "source", "help"}} for every environment-only knob."""
    env = os.environ if env is None else env
    out = {}
    for knob in ENV_KNOBS:
        raw = env.get(knob.name, "")
        out[f"env.{knob.name}"] = ({"value": raw, "source": f"env ({knob.name})", "help": knob.help} if raw else
                                   {"value": knob.default, "source": "default", "help": knob.help})
    return out


def mask_secret(secret: str) -> str:
    return f"{secret[:3]}…{secret[-4:]}" if len(secret) > 12 else "***"


class Config:
    """Resolved settings plus the raw file, for free-form tables."""

    def __init__(
        self, settings: dict[str, ResolvedSetting], file_data: dict[str, Any], file_path: Path | None
    ) -> None:
        self._settings = settings
        self._file_data = file_data
        self.file_path = file_path

    def get(self, key: str) -> Any:
        return self._resolved(key).value

    def origin(self, key: str) -> Origin:
        return self._resolved(key).origin

    def settings(self, section: str | None = None) -> list[ResolvedSetting]:
        return [
            s for k, s in sorted(self._settings.items())
            if section is None or k == section or k.startswith(section + ".")
        ]

    def table(self, key: str) -> dict[str, Any]:
        """The raw file table at a dotted key (empty if absent), e.g. `table("llm.prices")`."""
        node: Any = self._file_data
        for part in key.split("."):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return dict(node) if isinstance(node, dict) else {}

    def as_dict(self, reveal_secrets: bool = False) -> dict[str, dict[str, Any]]:
        """{key: {"value": ..., "source": "env (OPENAI_API_KEY)"}}, plus free-form tables."""
        out = {
            key: {"value": s.display_value(reveal_secrets), "source": str(s.origin)}
            for key, s in sorted(self._settings.items())
        }
        for table in sorted(_TABLES):
            for name, value in self.table(table).items():
                out[f"{table}.{name}"] = {
                    "value": value, "source": str(Origin("file", str(self.file_path)))
                }
        return out

    def _resolved(self, key: str) -> ResolvedSetting:
        try:
            return self._settings[key]
        except KeyError:
            raise KeyError(f"no setting named {key!r}; is the module that registers it imported?")


def find_config_file(explicit: Path | str | None, env: Mapping[str, str]) -> Path | None:
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        return path
    if env.get(CONFIG_ENV):
        path = Path(env[CONFIG_ENV]).expanduser()
        if not path.is_file():
            raise ConfigError(f"{CONFIG_ENV}={path} names a file that does not exist")
        return path
    local = Path.cwd() / CONFIG_FILE_NAME
    return local if local.is_file() else None


def load_config(
    path: Path | str | None = None,
    *,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Resolve every registered setting. `flags` maps setting keys to values given on the
    command line; a `None` value means the flag was not given."""
    env = os.environ if env is None else env
    file_path = find_config_file(path, env)
    file_data = _read_toml(file_path) if file_path else {}
    if file_path:
        _reject_unknown_keys(file_data, file_path)
    flags = flags or {}
    unknown_flags = set(flags) - set(_SETTINGS)
    if unknown_flags:
        raise ConfigError(f"flags for unknown settings: {sorted(unknown_flags)}")

    resolved: dict[str, ResolvedSetting] = {}
    for key, spec in _SETTINGS.items():
        value, origin = spec.default, Origin("default")
        found, file_value = _lookup(file_data, key)
        if found:
            value, origin = _coerce(spec, file_value, f"{key} in {file_path}"), Origin("file", str(file_path))
        if spec.env and env.get(spec.env, "") != "":
            value, origin = _coerce(spec, env[spec.env], f"${spec.env}"), Origin("env", spec.env)
        if flags.get(key) is not None:
            flag = spec.flag or key
            value, origin = _coerce(spec, flags[key], flag), Origin("flag", flag)
        resolved[key] = ResolvedSetting(spec, value, origin)
    return Config(resolved, file_data, file_path)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc


def _lookup(data: dict[str, Any], key: str) -> tuple[bool, Any]:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _reject_unknown_keys(data: dict[str, Any], path: Path) -> None:
    """Typos in a section we own are errors (a silently ignored `timout_s` wastes a day);
    sections nobody registered are left alone, as they may belong to a module not loaded."""
    known_sections = {k.split(".")[0] for k in _SETTINGS}
    known_prefixes = {k.rsplit(".", 1)[0] for k in _SETTINGS} | _TABLES

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, value in node.items():
            key = f"{prefix}.{name}" if prefix else name
            if key in _TABLES or key in _SETTINGS:
                continue
            if isinstance(value, dict) and (key in known_prefixes or not prefix):
                walk(value, key)
                continue
            if prefix.split(".")[0] not in known_sections:
                continue
            close = difflib.get_close_matches(key, list(_SETTINGS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{path}: unknown setting {key!r}{hint}")

    walk(data, "")


def _coerce(spec: SettingSpec, raw: Any, where: str) -> Any:
    try:
        if spec.type is bool:
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
                return raw.strip().lower() in _TRUE
            raise ValueError
        if spec.type is int:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            return int(raw)
        if spec.type is float:
            if isinstance(raw, bool):
                raise ValueError
            return float(raw)
        if spec.type is Path:
            return Path(str(raw)).expanduser()
        if not isinstance(raw, str):
            raise ValueError
        return raw
    except (TypeError, ValueError):
        raise ConfigError(
            f"{where}: expected {spec.type.__name__} for {spec.key} ({spec.help}), got {raw!r}"
        ) from None
