"""Node parameter schemas: each node's parameters with their types and ranges, YAML defaults,
and the check every value goes through (:func:`check_value`, built on the config readers of
:mod:`asap_ros.config.reader`, so a node parameter and a config-file key are validated alike).

Each node lists its parameters as :class:`ParamSpec`. Defaults come from the node's file in
``config/`` (ROS ``--params-file`` layout: ``node_name: {ros__parameters: {...}}``), so the
same file serves ``ros2 launch`` and the node's own defaults. Every value, whether from the
file, a ``-p`` override or a runtime ``set_parameters`` call, goes through
:func:`check_value`: a wrong type or an out-of-range value is refused with a message naming
the parameter, the problem and the value. At start-up that refusal stops the node; at run
time the call fails and the node keeps its previous values (:class:`asap_ros.ros.parameters.NodeParams`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asap_ros.config.controller import SAFETY_BOUNDS, STAND_UP_DURATION_S
from asap_ros.config.reader import load_yaml, number_problem, range_text
from asap_ros.core.errors import ConfigError

KINDS = ("bool", "int", "float", "str", "str_list")


@dataclass(frozen=True)
class ParamSpec:
    """One node parameter: type, allowed range, whether it may change while running."""

    name: str
    kind: str
    """One of :data:`KINDS`."""
    description: str
    low: float | None = None
    high: float | None = None
    runtime: bool = False
    """May be changed with ``set_parameters`` while the node runs (else read-only)."""
    empty_ok: bool = False
    """Strings: the empty string is allowed (it means "use the package default")."""
    zero_keeps: bool = False
    """Numbers: 0 is allowed outside the range and means "keep the value of the config file"."""

    def constraint_text(self) -> str:
        """The allowed range as text, e.g. ``10 <= value <= 1000``."""
        text = range_text(self.low, self.high)
        return f"0 (keep the config file's value) or {text}" if self.zero_keeps and text else text


NETWORK_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("network_interface", "str", "network interface of the robot's DDS network (sim: lo)"),
    ParamSpec("dds_domain", "int", "unitree DDS domain id (robot: 0)", low=0, high=232),
)

DEPLOY_PARAMS: tuple[ParamSpec, ...] = (
    *NETWORK_PARAMS,
    ParamSpec("robot_config", "str", "robot model file ('' = package config/g1_29dof.yaml)", empty_ok=True),
    ParamSpec("controller_config", "str", "controller file ('' = package config/controller.yaml)", empty_ok=True),
    ParamSpec("assets_dir", "str", "ASAP asset root ('' = ASAP_ASSETS / default search)", empty_ok=True),
    ParamSpec("policies", "str_list", "policy spec files; a relative name is looked up in the package policies/"),
    ParamSpec("default_motion", "str", "motion started by ~/start (one of the loaded policies)", runtime=True),
    ParamSpec("supervised", "bool", "write rt/lowcmd only under asap_supervisor's lease (the robot: true)"),
    ParamSpec("control_rate_hz", "float", "control loop rate", low=10.0, high=500.0),
    ParamSpec("state_wait_ms", "float", "longest wait for a LowState after the deadline", low=0.0, high=20.0),
    ParamSpec("late_after_ms", "float", "a step finishing this long after its deadline is late", low=0.5, high=50.0),
    ParamSpec("realtime_priority", "int", "SCHED_FIFO priority of the control thread (0 = normal)", low=0, high=99),
    ParamSpec("control_cpu", "int", "CPU the control thread is pinned to (-1 = not pinned)", low=-1, high=4095),
    ParamSpec("switch_interval_ms", "float", "Python thread switch interval (sys.setswitchinterval)", low=0.05, high=10.0),
    ParamSpec("state_publish_rate_hz", "float", "joint_states / imu publish rate", low=0.1, high=500.0, runtime=True),
    ParamSpec("diagnostics_rate_hz", "float", "diagnostics publish rate", low=0.1, high=50.0, runtime=True),
    ParamSpec("stand_up_duration_s", "float", "stand-up interpolation time", *STAND_UP_DURATION_S, zero_keeps=True),
    ParamSpec("max_state_age_ms", "float", "fault: LowState older than this", *SAFETY_BOUNDS["max_state_age_ms"], zero_keeps=True),
    ParamSpec("max_tilt_deg", "float", "fault: torso tilt above this", *SAFETY_BOUNDS["max_tilt_deg"], zero_keeps=True),
    ParamSpec("max_temperature_c", "float", "fault: motor hotter than this", *SAFETY_BOUNDS["max_temperature_c"], zero_keeps=True),
    ParamSpec("max_start_temperature_c", "float", "Start refused above this", *SAFETY_BOUNDS["max_start_temperature_c"], zero_keeps=True),
)
"""Parameters of ``asap_deploy``; ``zero_keeps`` ones override ``controller_config`` values, within
the bounds the controller config itself is held to (:mod:`asap_ros.config.controller`)."""

SUPERVISOR_PARAMS: tuple[ParamSpec, ...] = (
    *NETWORK_PARAMS,
    ParamSpec("robot_config", "str", "robot model file ('' = package config/g1_29dof.yaml)", empty_ok=True),
    ParamSpec("controller_config", "str", "controller file for damping kd ('' = package default)", empty_ok=True),
    ParamSpec("deploy_node", "str", "name of the asap_deploy node to forward e-stops to and watch"),
    ParamSpec("takeover_after_ms", "float", "stream damping when deploy is silent this long", low=25.0, high=1000.0),
    ParamSpec("estop_obey_ms", "float", "deploy must send damping this soon after an e-stop", low=10.0, high=1000.0),
    ParamSpec("lease_ms", "float", "how long one grant lets the deploy node write rt/lowcmd", low=20.0, high=1000.0),
    ParamSpec("damping_rate_hz", "float", "rate of the supervisor's own damping stream", low=10.0, high=1000.0),
    ParamSpec("estop_combo", "str", "wireless-remote buttons that e-stop, e.g. L2+B"),
    ParamSpec("terminal_estop", "bool", "ENTER on an interactive stdin e-stops"),
)
"""Parameters of ``asap_supervisor``."""


def check_value(spec: ParamSpec, value: Any, source: str) -> Any:
    """``value`` converted to the spec's type (an int is accepted for a float), or ConfigError."""
    def refuse(problem: str) -> ConfigError:
        return ConfigError(source, spec.name, problem, value)

    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise refuse("must be true or false")
        return value
    if spec.kind in ("int", "float"):
        integer = spec.kind == "int"
        problem = number_problem(value, integer)  # the type, then the range (which 0 may skip)
        if problem is None and not (spec.zero_keeps and value == 0):
            if number_problem(value, integer, spec.low, spec.high):
                problem = f"out of range: allowed {spec.constraint_text()}"
        if problem:
            raise refuse(problem)
        return int(value) if integer else float(value)
    if spec.kind == "str":
        if not isinstance(value, str) or (not value and not spec.empty_ok):
            raise refuse("must be a non-empty string")
        return value
    if spec.kind == "str_list":
        if isinstance(value, str) or not isinstance(value, Sequence) or not value:
            raise refuse("must be a non-empty list of strings")
        if not all(isinstance(item, str) and item for item in value):
            raise refuse("every entry must be a non-empty string")
        return list(value)
    raise ValueError(f"parameter {spec.name}: unknown kind {spec.kind!r} (kinds: {', '.join(KINDS)})")


def load_defaults(path: str | Path, node_name: str, specs: Sequence[ParamSpec]) -> dict[str, Any]:
    """The validated ``node_name.ros__parameters`` of a params file; every spec must be set."""
    data = load_yaml(path)
    section = data.get(node_name) if isinstance(data, Mapping) else None
    params = section.get("ros__parameters") if isinstance(section, Mapping) else None
    if not isinstance(params, Mapping):
        raise ConfigError(path, f"{node_name}.ros__parameters", "required mapping missing")
    by_name = {spec.name: spec for spec in specs}
    source = str(path)
    for name in params:
        if name not in by_name:
            raise ConfigError(
                source, f"{node_name}.ros__parameters.{name}", f"unknown parameter (known: {', '.join(by_name)})"
            )
    values = {}
    for spec in specs:
        if spec.name not in params:
            raise ConfigError(source, f"{node_name}.ros__parameters.{spec.name}", "required parameter missing")
        values[spec.name] = check_value(spec, params[spec.name], source)
    return values
