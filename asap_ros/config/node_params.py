"""Node parameter schemas: each node's parameters with their types and ranges, YAML defaults,
and the check every value goes through (:func:`check_value`, built on the config readers of
:mod:`asap_ros.config.reader`, so a node parameter and a config-file key are validated alike).

Each of the four nodes is a :class:`NodeSchema` here (:data:`DEPLOY`, :data:`SUPERVISOR`,
:data:`RECORDER`, :data:`MOCAP`): its name, its parameters as :class:`ParamSpec` and its
defaults file in ``config/`` (ROS ``--params-file`` layout: ``node_name: {ros__parameters:
{...}}``), so the same file serves ``ros2 launch`` and the node's own defaults. Every value, whether from the
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
from asap_ros.config.paths import config_file
from asap_ros.config.reader import load_yaml, number_problem, range_text
from asap_ros.core.errors import ConfigError

__all__ = [
    "DEPLOY", "DEPLOY_PARAMS", "KINDS", "MOCAP", "MOCAP_MODES", "MOCAP_PARAMS", "NETWORK_PARAMS", "NODES",
    "RECORDER", "RECORDER_COMPRESSIONS", "RECORDER_MAX_FLUSH_PERIOD_S", "RECORDER_PARAMS", "SUPERVISOR",
    "SUPERVISOR_PARAMS", "NodeSchema", "ParamSpec", "check_value", "help_requested", "load_defaults",
]

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
    choices: tuple[str, ...] = ()
    """Strings: the only values allowed (none: any)."""

    def constraint_text(self) -> str:
        """The allowed values as text, e.g. ``10 <= value <= 1000`` or ``one of vicon, topic``."""
        if self.choices:
            return f"one of {', '.join(self.choices)}"
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
    ParamSpec("lease_ms", "float", "the longest lease a supervisor's grant gives (its lease_ms; a longer one is cut)",
              low=50.0, high=1000.0),
    ParamSpec("command_timeout_ms", "float", "the robot's command timeout: a longer gap latches DAMPING",
              low=10.0, high=1000.0),
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
    ParamSpec("realtime_priority", "int", "SCHED_FIFO priority of the watchdog thread (0 = normal)", low=0, high=99),
    ParamSpec("receive_priority", "int", "SCHED_FIFO priority of the DDS receive threads and the beat, grant and "
              "rt/lowcmd readers (0 = as the node's other threads)", low=0, high=99),
    # below 25 Hz a write period is past the 40 ms of two control periods its takeover and
    # hand-over timing (Tick.write_until_ns, TAKEOVER_SILENCE_NS) count on: it would never write
    ParamSpec("damping_rate_hz", "float", "rate of the supervisor's own damping stream", low=25.0, high=1000.0),
    ParamSpec("estop_combo", "str", "wireless-remote buttons that e-stop, e.g. L2+B"),
    ParamSpec("terminal_estop", "bool", "ENTER on an interactive stdin e-stops"),
)
"""Parameters of ``asap_supervisor``."""

RECORDER_COMPRESSIONS = ("zstd", "lz4", "none")
"""MCAP chunk compressions (:data:`asap_ros.recording.bag_writer.COMPRESSIONS` maps each to mcap's)."""
RECORDER_MAX_FLUSH_PERIOD_S = 1.0
"""A ``kill -9`` of the recorder loses at most one flush period of data."""

RECORDER_PARAMS: tuple[ParamSpec, ...] = (
    *NETWORK_PARAMS,
    ParamSpec("output_dir", "str", "directory the session bags are created in ('~' expanded)"),
    ParamSpec("bag_name", "str", "bag directory name ('' = session_<YYYYmmdd_HHMMSS>)", empty_ok=True),
    ParamSpec("compression", "str", "MCAP chunk compression", choices=RECORDER_COMPRESSIONS),
    ParamSpec("flush_period_s", "float", "close the chunk and flush the file this often",
              low=0.05, high=RECORDER_MAX_FLUSH_PERIOD_S),
    ParamSpec("fsync", "bool", "fsync at every flush (survives power loss, not only a killed recorder)"),
    ParamSpec("split_max_mb", "float", "start the next file of the bag beyond this size (0 = never)", low=0.0),
    ParamSpec("split_max_duration_s", "float", "start the next file after this long (0 = never)", low=0.0),
    ParamSpec("min_free_mb", "float", "stop recording (fault on diagnostics) below this free space", low=0.0),
    ParamSpec("receive_buffer_mb", "float", "DDS socket receive buffer asked of the OS: rides out recorder stalls",
              low=0.1, high=1024.0),
    ParamSpec("mocap_pose_topic", "str", "geometry_msgs/PoseStamped from motion capture ('' = not recorded)",
              empty_ok=True),
    ParamSpec("mocap_odometry_topic", "str", "nav_msgs/Odometry from motion capture ('' = not recorded)",
              empty_ok=True),
    ParamSpec("diagnostics_topic", "str", "diagnostics: recorded, and where the recorder reports its status"),
    ParamSpec("operator_topic", "str", "std_msgs/String: the deploy node's operator requests ('' = not recorded)",
              empty_ok=True),
    ParamSpec("status_rate_hz", "float", "rate of the recorder's own diagnostics status", low=0.1, high=10.0),
    ParamSpec("policies", "str_list", "policy spec files described in the session (relative: package policies/)"),
    ParamSpec("assets_dir", "str", "ASAP asset root ('' = ASAP_ASSETS / default search)", empty_ok=True),
    ParamSpec("operator_notes", "str", "free text stored with the session", empty_ok=True),
)
"""Parameters of ``asap_recorder``."""

MOCAP_MODES = ("vicon", "topic")
"""``vicon``: client of the Vicon DataStream SDK; ``topic``: relay PoseStamped from ``mocap/input``."""

MOCAP_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("mode", "str", "vicon: Vicon DataStream SDK client; topic: relay PoseStamped from mocap/input",
              choices=MOCAP_MODES),
    ParamSpec("host", "str", "Vicon DataStream server host[:port] (vicon mode)"),
    ParamSpec("subject", "str", "Vicon subject tracking the robot (vicon mode)"),
    ParamSpec("segment", "str", "segment of the subject ('' = the subject's name)", empty_ok=True),
    ParamSpec("rate", "float", "expected mocap frame rate, Hz", low=1.0, high=2000.0),
    ParamSpec("frame_id", "str", "frame of the published poses (vicon mode; topic mode keeps the input's)"),
    ParamSpec("child_frame_id", "str", "body frame of the odometry twist"),
    ParamSpec("velocity_filter_alpha", "float", "EMA weight of the newest finite difference", low=0.01, high=1.0),
    ParamSpec("max_gap_periods", "float", "topic mode: longer intervals (in frame periods) are gaps",
              low=1.01, high=100.0),
    ParamSpec("diagnostics_rate_hz", "float", "diagnostics publish rate", low=0.1, high=50.0),
)
"""Parameters of ``asap_mocap``."""


@dataclass(frozen=True)
class NodeSchema:
    """One node: its name, its parameters and the package file with their defaults."""

    name: str
    params: tuple[ParamSpec, ...]
    defaults_file: str
    """File name in the package's ``config/`` (or an absolute path); ROS params-file layout, section ``name``."""

    def defaults_path(self) -> Path:
        """The package's defaults file of this node."""
        return config_file(self.defaults_file)

    def defaults(self, path: str | Path | None = None) -> dict[str, Any]:
        """The validated defaults from ``path`` (default: :meth:`defaults_path`)."""
        return load_defaults(path or self.defaults_path(), self.name, self.params)


DEPLOY = NodeSchema("asap_deploy", DEPLOY_PARAMS, "deploy.yaml")
SUPERVISOR = NodeSchema("asap_supervisor", SUPERVISOR_PARAMS, "supervisor.yaml")
RECORDER = NodeSchema("asap_recorder", RECORDER_PARAMS, "recorder.yaml")
MOCAP = NodeSchema("asap_mocap", MOCAP_PARAMS, "mocap.yaml")
NODES: dict[str, NodeSchema] = {schema.name: schema for schema in (DEPLOY, SUPERVISOR, RECORDER, MOCAP)}
"""The four nodes by name (their console scripts have the same names)."""


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
        if spec.choices and value not in spec.choices:
            raise refuse(f"must be {spec.constraint_text()}")
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


def help_requested(argv: Sequence[str] | None, node_name: str, summary: str, specs: Sequence[ParamSpec],
                   defaults_file: str | Path) -> bool:
    """Print the node's parameters and their defaults when ``-h``/``--help`` is among the arguments
    before any ``--ros-args`` (then start nothing: no rclpy, no DDS); return whether it was."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    own = args[: args.index("--ros-args")] if "--ros-args" in args else args
    if not {"-h", "--help"} & set(own):
        return False
    defaults = load_defaults(defaults_file, node_name, specs)
    print(f"usage: {node_name} [--ros-args -p NAME:=VALUE ... | --params-file FILE]\n\n{summary}\n")
    print(f"parameters (defaults from {defaults_file}):")
    for spec in specs:
        limits = f"; {spec.constraint_text()}" if spec.constraint_text() else ""
        changeable = "; changeable at run time" if spec.runtime else ""
        print(f"  {spec.name} = {defaults[spec.name]!r}  ({spec.kind}{limits}{changeable}): {spec.description}")
    return True

