"""Errors that name what was wrong, where, and with which value."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class AsapError(Exception):
    """Base class for every error asap_ros raises on purpose."""


class ConfigError(AsapError):
    """A configuration, spec or data file is invalid.

    The message always names the file, the key (dotted path) and the offending value.
    """

    def __init__(self, file: str | Path | None, key: str | None, problem: str, value: Any = None):
        self.file = str(file) if file is not None else None
        self.key = key
        self.problem = problem
        self.value = value
        where = self.file or "<config>"
        if key:
            where += f": {key}"
        text = f"{where}: {problem}"
        if value is not None:
            text += f" (got {value!r})"
        super().__init__(text)


class AssetError(AsapError):
    """An asset (actor, clip, model, config) is missing or does not match its checksum."""


class RejectedRequest(AsapError):
    """An operator request was refused; the controller state is unchanged."""
