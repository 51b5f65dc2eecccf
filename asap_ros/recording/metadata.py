"""rosbag2 ``metadata.yaml`` (version 9, MCAP storage) for a bag directory of MCAP files."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from asap_ros.core.errors import AsapError
from asap_ros.recording.typestore import ROS_DISTRO

METADATA_FILE = "metadata.yaml"
ROSBAG2_VERSION = 9


def qos_profiles(latched: bool) -> list[dict]:
    """``offered_qos_profiles`` (rosbag2 v9 form): reliable transient-local depth 1 for a latched
    topic, else none (the QoS of the raw DDS writers is not known to the recorder)."""
    if not latched:
        return []
    forever = {"sec": 9223372036, "nsec": 854775807}
    return [{
        "history": "keep_last", "depth": 1, "reliability": "reliable", "durability": "transient_local",
        "deadline": dict(forever), "lifespan": dict(forever), "liveliness": "automatic",
        "liveliness_lease_duration": dict(forever), "avoid_ros_namespace_conventions": False,
    }]


def qos_text(profiles: list[dict]) -> str:
    """The YAML form stored in an MCAP channel's ``offered_qos_profiles``."""
    return yaml.safe_dump(profiles, default_flow_style=None).strip() if profiles else "[]"


@dataclass(frozen=True)
class FileStats:
    """One MCAP file of a bag."""

    name: str
    """File name inside the bag directory."""
    start_ns: int
    end_ns: int
    message_count: int


@dataclass(frozen=True)
class TopicStats:
    """One topic of a bag with its message count over all files."""

    name: str
    msgtype: str
    type_hash: str
    message_count: int
    qos: list[dict] = field(default_factory=list)
    """``offered_qos_profiles`` in rosbag2 v9 form."""


def build_metadata(
    files: Sequence[FileStats], topics: Sequence[TopicStats], custom_data: Mapping[str, str]
) -> dict:
    """The ``rosbag2_bagfile_information`` document."""
    counted = [f for f in files if f.message_count]
    start = min((f.start_ns for f in counted), default=0)
    end = max((f.end_ns for f in counted), default=0)
    return {
        "rosbag2_bagfile_information": {
            "version": ROSBAG2_VERSION,
            "storage_identifier": "mcap",
            "relative_file_paths": [f.name for f in files],
            "duration": {"nanoseconds": end - start},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": sum(f.message_count for f in files),
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": t.name,
                        "type": t.msgtype,
                        "serialization_format": "cdr",
                        "offered_qos_profiles": t.qos,
                        "type_description_hash": t.type_hash,
                    },
                    "message_count": t.message_count,
                }
                for t in topics
            ],
            "compression_format": "",
            "compression_mode": "",
            "files": [
                {
                    "path": f.name,
                    "starting_time": {"nanoseconds_since_epoch": f.start_ns},
                    "duration": {"nanoseconds": f.end_ns - f.start_ns},
                    "message_count": f.message_count,
                }
                for f in files
            ],
            "custom_data": dict(custom_data),
            "ros_distro": ROS_DISTRO,
        }
    }


def write_metadata(
    bag_dir: Path, files: Sequence[FileStats], topics: Sequence[TopicStats], custom_data: Mapping[str, str]
) -> Path:
    """Write ``metadata.yaml`` atomically (temporary file, fsync, rename)."""
    path = bag_dir / METADATA_FILE
    tmp = path.with_suffix(".yaml.tmp")
    with tmp.open("w", encoding="utf-8") as stream:
        yaml.safe_dump(build_metadata(files, topics, custom_data), stream, sort_keys=False)
        stream.flush()
        os.fsync(stream.fileno())
    tmp.replace(path)
    return path


def read_metadata(bag_dir: Path) -> dict:
    """The ``rosbag2_bagfile_information`` of a bag; :class:`AsapError` if missing or unreadable."""
    path = bag_dir / METADATA_FILE
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        info = document["rosbag2_bagfile_information"]
        if not isinstance(info.get("relative_file_paths"), list):
            raise KeyError("relative_file_paths")
        return info
    except FileNotFoundError as exc:
        raise AsapError(
            f"{bag_dir}: no {METADATA_FILE}: the recorder did not close this bag (killed or crashed?); "
            f"recover it with `asap-ros bag repair {bag_dir}`"
        ) from exc
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
        raise AsapError(f"{path}: unreadable rosbag2 metadata ({exc!r}); try `asap-ros bag repair {bag_dir}`") from exc


def listed_files(bag_dir: Path) -> list[str]:
    """File names ``metadata.yaml`` lists."""
    return [str(name) for name in read_metadata(bag_dir)["relative_file_paths"]]
