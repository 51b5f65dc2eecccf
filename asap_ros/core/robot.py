"""The G1 robot model as data: motor names and order, limits, default pose, deploy gains."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from asap_ros.core.errors import ConfigError


def frozen_array(values: Sequence[float]) -> np.ndarray:
    """A read-only float64 copy of ``values``."""
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
