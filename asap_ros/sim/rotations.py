"""Rotation helpers of the simulator: IMU/mocap orientation noise and a fast 3-vector cross product."""

from __future__ import annotations

import numpy as np

from asap_ros.core.quaternion import quat_from_rotvec, quat_multiply


def perturb_quat(quat_wxyz: np.ndarray, std_rad: float, rng: np.random.Generator) -> np.ndarray:
    """``quat_wxyz`` rotated (in its body frame) by a random rotation vector of per-axis std ``std_rad``."""
    if std_rad <= 0.0:
        return quat_wxyz
    return quat_multiply(quat_wxyz, quat_from_rotvec(rng.normal(0.0, std_rad, 3)))


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """3-vector cross product (``np.cross`` costs ~30 us per call on small vectors)."""
    ax, ay, az = a.tolist()
    bx, by, bz = b.tolist()
    return np.array([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx])
