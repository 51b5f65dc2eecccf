"""YAML loading and typed field readers whose errors name file, key and value.

Usage::

    cfg = load_config(path)                    # ConfigReader over the top-level mapping
    rate = cfg.float("rate_hz", low=1.0)       # required positive float
    gains = cfg.section("gains")               # nested mapping, keys reported as "gains.kp"
    kp = gains.floats("kp", length=29, low=0)  # float64 array
    cfg.reject_unknown({"rate_hz", "gains"})   # typos are errors, not silently ignored

Every problem raises :class:`~asap_ros.core.errors.ConfigError` with the file, the dotted key,
what is wrong and the offending value. :func:`number_problem` is the one number check, shared
with the node parameters (:mod:`asap_ros.config.node_params`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from asap_ros.core.errors import ConfigError

_REQUIRED = object()


def range_text(low: float | None, high: float | None) -> str:
    """An allowed range as text, e.g. ``10 <= value <= 1000`` (``""``: unbounded)."""
    parts = [f"{low:g} <=" if low is not None else "", "value" if low is not None or high is not None else "",
             f"<= {high:g}" if high is not None else ""]
    return " ".join(p for p in parts if p)


def number_problem(value: Any, integer: bool = False, low: float | None = None, high: float | None = None) -> str | None:
    """What is wrong with ``value`` as a number (an integer if ``integer``) in [low, high]; ``None``: nothing."""
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return "must be an integer" if integer else "must be a number"
    if not math.isfinite(value):
        return "must be finite"
    if (low is not None and value < low) or (high is not None and value > high):
        return f"out of range: allowed {range_text(low, high)}"
    return None


def load_yaml(path: str | Path) -> Any:
    """Parse one YAML file; a missing file or a syntax error names the file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read file: {exc.strerror or exc}") from exc
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(path, None, f"YAML syntax error at {where}{exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(path, None, f"YAML error: {exc}") from exc


def load_config(path: str | Path) -> ConfigReader:
    """Load a YAML file whose top level must be a mapping."""
    data = load_yaml(path)
    if not isinstance(data, Mapping):
        raise ConfigError(path, None, "top level must be a mapping", type(data).__name__)
    return ConfigReader(data, path)


class ConfigReader:
    """Typed, validated access to one mapping of a YAML file."""

    def __init__(self, data: Mapping[str, Any], file: str | Path, prefix: str = ""):
        self.data = data
        self.file = Path(file)
        self.prefix = prefix

    # -- generic -------------------------------------------------------------------------
    def key(self, name: str) -> str:
        """Dotted key of ``name`` within the file (for error messages)."""
        return f"{self.prefix}.{name}" if self.prefix else name

    def error(self, name: str | None, problem: str, value: Any = None) -> ConfigError:
        """A :class:`ConfigError` for ``name`` in this mapping (``None``: the mapping itself)."""
        return ConfigError(self.file, self.key(name) if name else self.prefix or None, problem, value)

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str, default: Any = _REQUIRED) -> Any:
        """The value as parsed; a missing key raises unless a default is given."""
        if name in self.data:
            return self.data[name]
        if default is _REQUIRED:
            raise self.error(name, "required key missing")
        return default

    def reject_unknown(self, allowed: Collection[str]) -> None:
        """Refuse keys outside ``allowed`` (catches typos that would silently be ignored)."""
        for name in self.data:
            if name not in allowed:
                raise self.error(str(name), f"unknown key (allowed: {', '.join(sorted(allowed))})")

    # -- scalars -------------------------------------------------------------------------
    def str(self, name: str, default: Any = _REQUIRED, choices: Collection[str] | None = None) -> str:
        value = self.raw(name, default)
        if not isinstance(value, str) or not value:
            raise self.error(name, "must be a non-empty string", value)
        if choices is not None and value not in choices:
            raise self.error(name, f"must be one of {', '.join(sorted(choices))}", value)
        return value

    def bool(self, name: str, default: Any = _REQUIRED) -> bool:
        value = self.raw(name, default)
        if not isinstance(value, bool):
            raise self.error(name, "must be true or false", value)
        return value

    def int(self, name: str, default: Any = _REQUIRED, low: int | None = None, high: int | None = None) -> int:
        value = self.raw(name, default)
        problem = number_problem(value, integer=True, low=low, high=high)
        if problem:
            raise self.error(name, problem, value)
        return int(value)

    def float(
        self, name: str, default: Any = _REQUIRED, low: float | None = None, high: float | None = None
    ) -> float:
        value = self.raw(name, default)
        problem = number_problem(value, low=low, high=high)
        if problem:
            raise self.error(name, problem, value)
        return float(value)

    # -- sequences and mappings ----------------------------------------------------------
    def floats(
        self,
        name: str,
        default: Any = _REQUIRED,
        length: int | None = None,
        low: float | None = None,
        high: float | None = None,
    ) -> np.ndarray:
        """A list of finite numbers as a float64 array."""
        value = self.raw(name, default)
        if not isinstance(value, list) or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) for v in value
        ):
            raise self.error(name, "must be a list of numbers", value)
        array = np.asarray(value, dtype=np.float64)
        if length is not None and array.size != length:
            raise self.error(name, f"must have {length} entries, has {array.size}", value)
        if not np.all(np.isfinite(array)):
            raise self.error(name, "entries must be finite", value)
        for i, item in enumerate(value):
            problem = number_problem(item, low=low, high=high)
            if problem:
                raise self.error(f"{name}[{i}]", problem, item)
        return array

    def strs(self, name: str, default: Any = _REQUIRED, length: int | None = None) -> tuple[str, ...]:
        """A list of distinct non-empty strings."""
        value = self.raw(name, default)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(name, "must be a list of non-empty strings", value)
        if length is not None and len(value) != length:
            raise self.error(name, f"must have {length} entries, has {len(value)}", value)
        duplicates = sorted({v for v in value if value.count(v) > 1})
        if duplicates:
            raise self.error(name, "duplicate entries", duplicates)
        return tuple(value)

    def joint_names(self, name: str, known: Iterable[str], default: Any = _REQUIRED) -> tuple[str, ...]:
        """A list of distinct joint names, each one of ``known``."""
        names = self.strs(name, default)
        self.check_joint_names(name, names, known)
        return names

    def check_joint_names(self, name: str, names: Iterable[str], known: Iterable[str]) -> None:
        """Refuse any of ``names`` that is not in ``known``."""
        known_set = set(known)
        for joint in names:
            if joint not in known_set:
                raise self.error(name, "unknown joint name", joint)

    def joint_values(
        self, name: str, known: Iterable[str], default: Any = _REQUIRED, low: float | None = None
    ) -> dict[str, float]:
        """A mapping ``joint_name: number`` with known joint names."""
        section = self.section(name, default)
        self.check_joint_names(name, section.data, known)
        return {str(j): section.float(str(j), low=low) for j in section.data}

    def section(self, name: str, default: Any = _REQUIRED) -> ConfigReader:
        """The nested mapping under ``name``."""
        value = self.raw(name, default)
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            raise self.error(name, "must be a mapping", value)
        return ConfigReader(value, self.file, self.key(name))

    def sections(self, name: str) -> list[ConfigReader]:
        """A list of mappings, each reported as ``name[i]``."""
        value = self.raw(name)
        if not isinstance(value, list):
            raise self.error(name, "must be a list of mappings", value)
        readers = []
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                raise self.error(f"{name}[{i}]", "must be a mapping", item)
            readers.append(ConfigReader(item, self.file, self.key(f"{name}[{i}]")))
        return readers

    def path(self, name: str, base: str | Path, default: Any = _REQUIRED, must_exist: bool = True) -> Path:
        """A file path relative to ``base``; missing files are an error when ``must_exist``."""
        path = Path(base) / self.str(name, default)
        if must_exist and not path.exists():
            raise self.error(name, f"file not found under {base}", str(path))
        return path
