"""Recorder settings: ``config/recorder.yaml`` (ROS params-file layout of node ``asap_recorder``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asap_ros.config.node_params import NETWORK_PARAMS, ParamSpec, load_defaults
from asap_ros.config.paths import config_file
from asap_ros.core.errors import ConfigError
from asap_ros.recording.bag_writer import COMPRESSIONS, SplitPolicy

NODE_NAME = "asap_recorder"
MAX_FLUSH_PERIOD_S = 1.0
"""A ``kill -9`` loses at most one flush period of data."""

RECORDER_PARAMS: tuple[ParamSpec, ...] = (
    *NETWORK_PARAMS,
    ParamSpec("output_dir", "str", "directory the session bags are created in ('~' expanded)"),
    ParamSpec("bag_name", "str", "bag directory name ('' = session_<YYYYmmdd_HHMMSS>)", empty_ok=True),
    ParamSpec("compression", "str", f"MCAP chunk compression: {', '.join(COMPRESSIONS)}"),
    ParamSpec("flush_period_s", "float", "close the chunk and flush the file this often", low=0.05, high=MAX_FLUSH_PERIOD_S),
    ParamSpec("fsync", "bool", "fsync at every flush (survives power loss, not only a killed recorder)"),
    ParamSpec("split_max_mb", "float", "start the next file of the bag beyond this size (0 = never)", low=0.0),
    ParamSpec("split_max_duration_s", "float", "start the next file after this long (0 = never)", low=0.0),
    ParamSpec("min_free_mb", "float", "stop recording (fault on diagnostics) below this free space", low=0.0),
    ParamSpec("receive_buffer_mb", "float", "DDS socket receive buffer asked of the OS: rides out recorder stalls",
              low=0.1, high=1024.0),
    ParamSpec("mocap_pose_topic", "str", "geometry_msgs/PoseStamped from motion capture ('' = not recorded)", empty_ok=True),
    ParamSpec("mocap_odometry_topic", "str", "nav_msgs/Odometry from motion capture ('' = not recorded)", empty_ok=True),
    ParamSpec("diagnostics_topic", "str", "diagnostics: recorded, and where the recorder reports its status"),
    ParamSpec("operator_topic", "str", "std_msgs/String: the deploy node's operator requests ('' = not recorded)",
              empty_ok=True),
    ParamSpec("status_rate_hz", "float", "rate of the recorder's own diagnostics status", low=0.1, high=10.0),
    ParamSpec("policies", "str_list", "policy spec files described in the session (relative: package policies/)"),
    ParamSpec("assets_dir", "str", "ASAP asset root ('' = ASAP_ASSETS / default search)", empty_ok=True),
    ParamSpec("operator_notes", "str", "free text stored with the session", empty_ok=True),
)


@dataclass(frozen=True)
class RecorderConfig:
    """Validated recorder settings (see ``config/recorder.yaml`` for each meaning)."""

    output_dir: Path
    bag_name: str = ""
    compression: str = "zstd"
    flush_period_s: float = 0.5
    fsync: bool = True
    split: SplitPolicy = SplitPolicy()
    min_free_bytes: int = 0
    ros_topics: dict[str, str] = field(default_factory=dict)
    """``mocap_pose``/``mocap_odometry``/``diagnostics``/``operator`` -> topic name ('' = not recorded)."""
    status_rate_hz: float = 1.0
    dds_domain: int = 0
    network_interface: str = "lo"
    receive_buffer_bytes: int = 4_000_000
    policies: tuple[str, ...] = ()
    assets_dir: str = ""
    operator_notes: str = ""


def recorder_config(values: Mapping[str, Any], source: str) -> RecorderConfig:
    """A :class:`RecorderConfig` from validated parameter values (``source`` names them in errors)."""
    if values["compression"] not in COMPRESSIONS:
        raise ConfigError(source, "compression", f"must be one of {', '.join(COMPRESSIONS)}", values["compression"])
    if not values["diagnostics_topic"]:
        raise ConfigError(source, "diagnostics_topic", "must name a topic", values["diagnostics_topic"])
    return RecorderConfig(
        output_dir=Path(values["output_dir"]).expanduser(),
        bag_name=values["bag_name"],
        compression=values["compression"],
        flush_period_s=values["flush_period_s"],
        fsync=values["fsync"],
        split=SplitPolicy(
            max_bytes=int(values["split_max_mb"] * 1e6), max_duration_ns=int(values["split_max_duration_s"] * 1e9)
        ),
        min_free_bytes=int(values["min_free_mb"] * 1e6),
        ros_topics={
            "mocap_pose": values["mocap_pose_topic"],
            "mocap_odometry": values["mocap_odometry_topic"],
            "diagnostics": values["diagnostics_topic"],
            "operator": values["operator_topic"],
        },
        status_rate_hz=values["status_rate_hz"],
        dds_domain=values["dds_domain"],
        network_interface=values["network_interface"],
        receive_buffer_bytes=int(values["receive_buffer_mb"] * 1e6),
        policies=tuple(values["policies"]),
        assets_dir=values["assets_dir"],
        operator_notes=values["operator_notes"],
    )


def load_recorder_config(path: str | Path | None = None) -> RecorderConfig:
    """Settings from a params file (default: the package's ``config/recorder.yaml``)."""
    path = Path(path) if path is not None else config_file("recorder.yaml")
    return recorder_config(load_defaults(path, NODE_NAME, RECORDER_PARAMS), str(path))
