"""Recorder settings: ``config/recorder.yaml`` (ROS params-file layout of node ``asap_recorder``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asap_ros.config.node_params import RECORDER, RECORDER_PARAMS
from asap_ros.recording.bag_writer import SplitPolicy

__all__ = ["NODE_NAME", "RECORDER_PARAMS", "RecorderConfig", "load_recorder_config", "recorder_config"]

NODE_NAME = RECORDER.name


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


def recorder_config(values: Mapping[str, Any]) -> RecorderConfig:
    """A :class:`RecorderConfig` from parameter values validated against
    :data:`~asap_ros.config.node_params.RECORDER_PARAMS`."""
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
    return recorder_config(RECORDER.defaults(path))
