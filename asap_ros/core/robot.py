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


KP_SATURATION_RAD = 0.05
"""A position gain at which a target this far from the joint (3 degrees) alone asks for the motor's
whole effort limit: above it a gain only saturates the motor. ASAP's deploy gains ask for at most a
fifth of that (waist roll: kp 400 against 50 N m / 0.05 rad = 1000)."""
KD_SATURATION_RAD_S = 1.0
"""Likewise for the damping gain: a joint moving at 1 rad/s alone saturates the motor (ASAP's largest,
the knee's kd 5, asks for 5 of its 139 N m at 1 rad/s)."""


def gain_problem(key: str, value: float, tau_limit: float) -> str | None:
    """Why a joint's ``kp`` or ``kd`` is beyond the motor (None: within
    ``tau_limit / KP_SATURATION_RAD`` or ``tau_limit / KD_SATURATION_RAD_S``)."""
    bound = tau_limit / (KP_SATURATION_RAD if key == "kp" else KD_SATURATION_RAD_S)
    if value > bound:
        unit = f"{KP_SATURATION_RAD:g} rad" if key == "kp" else f"{KD_SATURATION_RAD_S:g} rad/s"
        return (f"must be at most {bound:g} (the motor's {tau_limit:g} N m effort limit reached at {unit}; "
                "a larger gain only saturates the motor)")
    return None


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

    def clip_targets(self, q_target: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``q_target`` (..., 29) clipped to the joint position limits, what the runtime sends the motors."""
        clipped: np.ndarray = np.minimum(q_target, self.q_upper, out=out)
        np.maximum(clipped, self.q_lower, out=clipped)
        return clipped

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
