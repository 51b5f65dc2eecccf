"""ROS parameters of a node: declared from a :mod:`asap_ros.config.node_params` schema, checked
with :func:`~asap_ros.config.node_params.check_value` at start-up and on every runtime change."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from asap_ros.config.node_params import NodeSchema, ParamSpec, check_value
from asap_ros.core.errors import ConfigError

__all__ = ["NodeParams", "Validator"]

Validator = Callable[[dict[str, Any]], None]
"""Whole-set check run on the candidate values (raise ConfigError to refuse)."""


class NodeParams:
    """Declares a node's parameters, validates them and guards runtime changes.

    ``values`` always holds the validated current values. A validator installed with
    :meth:`set_validator` sees the complete candidate set, so cross-parameter rules (e.g. a
    default motion that must be loaded) hold at start-up and after every accepted change.
    """

    def __init__(self, node: Any, specs: Sequence[ParamSpec], defaults: Mapping[str, Any]):
        from rcl_interfaces.msg import ParameterDescriptor

        self._specs = {spec.name: spec for spec in specs}
        self._validate: Validator | None = None
        self._listeners: list[Callable[[dict[str, Any]], None]] = []
        self.source = f"ROS parameters of {node.get_fully_qualified_name()}"
        raw: dict[str, Any] = {}
        for spec in specs:
            descriptor = ParameterDescriptor(
                name=spec.name,
                description=spec.description,
                additional_constraints=spec.constraint_text(),
                read_only=not spec.runtime,
                dynamic_typing=True,  # types are checked here, with messages naming the value
            )
            raw[spec.name] = node.declare_parameter(spec.name, defaults[spec.name], descriptor).value
        self.values = {name: check_value(self._specs[name], value, self.source) for name, value in raw.items()}
        node.add_on_set_parameters_callback(self._on_set)

    @classmethod
    def for_schema(cls, node: Any, schema: NodeSchema, defaults_file: str | Path | None = None) -> NodeParams:
        """Declare ``schema``'s parameters on ``node`` with the defaults of its file (the package's
        ``config/`` one unless ``defaults_file``) and refuse an override (``-p``, a params file)
        that names no parameter of the node: a misspelt name would otherwise be ignored."""
        from asap_ros.ros.compat import parameter_overrides

        params = cls(node, schema.params, schema.defaults(defaults_file))
        for name, value in parameter_overrides(node).items():
            if not node.has_parameter(name):
                raise ConfigError(params.source, name, f"unknown parameter (known: {', '.join(params._specs)})", value)
        return params

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def set_validator(self, validate: Validator) -> None:
        """Check the current values now (ConfigError at start-up) and every later change."""
        validate(dict(self.values))
        self._validate = validate

    def on_change(self, listener: Callable[[dict[str, Any]], None]) -> None:
        """Call ``listener(changed values)`` after each accepted runtime change."""
        self._listeners.append(listener)

    def _on_set(self, parameters: list[Any]) -> Any:
        from rcl_interfaces.msg import SetParametersResult

        candidate = dict(self.values)
        try:
            for parameter in parameters:
                spec = self._specs.get(parameter.name)
                if spec is None:
                    raise ConfigError(self.source, parameter.name, "unknown parameter")
                candidate[spec.name] = check_value(spec, parameter.value, self.source)
            if self._validate is not None:
                self._validate(dict(candidate))
        except ConfigError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        changed = {name: value for name, value in candidate.items() if self.values[name] != value}
        self.values = candidate
        for listener in self._listeners:
            listener(changed)
        return SetParametersResult(successful=True)
