"""The G1 robot model as data: motor names and order, limits, default pose, deploy gains."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.config.paths import config_file
from asap_ros.core.state import NUM_MOTORS
from asap_ros.config.reader import load_config

DEFAULT_FILE = "g1_29dof.yaml"


def _frozen(values: Sequence[float]) -> np.ndarray:
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class RobotModel:
    """Per-motor data in G1 motor order (arrays are read-only, float64, length 29)."""

    name: str
    joint_names: tuple[str, ...]
    q_lower: np.ndarray
    q_upper: np.ndarray
    dq_limit: np.ndarray
    tau_limit: np.ndarray
    default_q: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Named joint subsets, e.g. ``asap_driven`` (23), ``legs`` (12), ``upper_body`` (17)."""
    source: str = "<robot model>"
    """File the model was loaded from (named in errors)."""

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    def index(self, joint: str) -> int:
        """Motor index of ``joint``; an unknown name is a :class:`ConfigError`."""
        try:
            return self.joint_names.index(joint)
        except ValueError:
            raise ConfigError(self.source, "joints", "unknown joint name", joint) from None

    def indices(self, joints: Sequence[str]) -> np.ndarray:
        """Motor indices (int64 array) of ``joints``, in the given order."""
        return np.array([self.index(j) for j in joints], dtype=np.int64)

    def group(self, name: str) -> tuple[str, ...]:
        """Joint names of a named subset; an unknown group is a :class:`ConfigError`."""
        if name not in self.groups:
            raise ConfigError(self.source, "groups", f"unknown joint group (known: {', '.join(self.groups)})", name)
        return self.groups[name]


def load_robot_model(path: str | Path | None = None) -> RobotModel:
    """Load a robot model (default: the package's ``config/g1_29dof.yaml``)."""
    path = Path(path) if path is not None else config_file(DEFAULT_FILE)
    cfg = load_config(path)
    cfg.reject_unknown({"name", "joints", "groups"})
    rows = cfg.sections("joints")
    if len(rows) != NUM_MOTORS:
        raise cfg.error("joints", f"must list {NUM_MOTORS} motors, lists {len(rows)}", len(rows))
    columns: dict[str, list[float]] = {k: [] for k in ("q_min", "q_max", "dq_max", "tau_max", "default_q", "kp", "kd")}
    names: list[str] = []
    for row in rows:
        row.reject_unknown({"name", *columns})
        names.append(row.str("name"))
        for key in ("dq_max", "tau_max", "kp", "kd"):
            columns[key].append(row.float(key, low=0.0))
        q_min, q_max = row.float("q_min"), row.float("q_max")
        if q_min >= q_max:
            raise row.error("q_max", f"must be greater than q_min {q_min}", q_max)
        columns["q_min"].append(q_min)
        columns["q_max"].append(q_max)
        columns["default_q"].append(row.float("default_q", low=q_min, high=q_max))
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise cfg.error("joints", "duplicate joint names", duplicates)
    groups_cfg = cfg.section("groups", {})
    groups = {str(g): groups_cfg.joint_names(str(g), names) for g in groups_cfg.data}
    return RobotModel(
        name=cfg.str("name"),
        joint_names=tuple(names),
        q_lower=_frozen(columns["q_min"]),
        q_upper=_frozen(columns["q_max"]),
        dq_limit=_frozen(columns["dq_max"]),
        tau_limit=_frozen(columns["tau_max"]),
        default_q=_frozen(columns["default_q"]),
        kp=_frozen(columns["kp"]),
        kd=_frozen(columns["kd"]),
        groups=groups,
        source=str(path),
    )
