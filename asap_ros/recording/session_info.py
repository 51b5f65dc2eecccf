"""The session description stored with every bag: software, policies (with SHA-256), robot.

It goes into ``metadata.yaml`` ``custom_data`` (flat string keys), into an ``asap_session``
metadata record of every MCAP file, and as JSON on the latched ``/asap/session`` topic.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from asap_ros import __version__
from asap_ros.config.policy_spec import load_policy_spec, sha256_of


@dataclass(frozen=True)
class PolicyRecord:
    """One loaded policy: its spec, ONNX actor and motion clip, each with SHA-256."""

    name: str
    spec_file: str
    spec_sha256: str
    actor_file: str
    actor_sha256: str
    clip_file: str
    clip_sha256: str


def describe_policies(spec_files: Sequence[str | Path], assets_dir: str | Path | None = None) -> list[PolicyRecord]:
    """Load and validate each spec (``ConfigError`` names a bad one), hash its files."""
    records = []
    for spec_file in spec_files:
        spec = load_policy_spec(spec_file, assets_dir=assets_dir)
        records.append(
            PolicyRecord(
                spec.name, str(spec.source), sha256_of(Path(spec.source)),
                str(spec.actor_path), sha256_of(spec.actor_path),
                str(spec.clip_path), sha256_of(spec.clip_path),
            )
        )
    return records


@dataclass
class SessionInfo:
    """What a session ran; ``robot`` fills in from the first LowState."""

    policies: list[PolicyRecord] = field(default_factory=list)
    operator_notes: str = ""
    started_ns: int = field(default_factory=time.time_ns)
    package_version: str = __version__
    host: str = field(default_factory=socket.gethostname)
    robot: dict[str, str] = field(default_factory=dict)
    """``version`` (LowState.version, the G1 reports no serial number) and ``mode_machine``."""

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def custom_data(self) -> dict[str, str]:
        """Flat string keys for rosbag2 ``custom_data``."""
        return {
            "asap_ros.version": self.package_version,
            "asap_ros.host": self.host,
            "asap_ros.started_ns": str(self.started_ns),
            "asap_ros.operator_notes": self.operator_notes,
            "asap_ros.policies": json.dumps([asdict(p) for p in self.policies], sort_keys=True),
            **{f"asap_ros.robot.{key}": value for key, value in self.robot.items()},
        }
