"""Small quaternion helpers (w, x, y, z; Hamilton convention) for sensor and mocap noise."""

from __future__ import annotations

import math

import numpy as np


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ])


def quat_from_rotvec(rotvec: np.ndarray) -> np.ndarray:
    angle = float(np.linalg.norm(rotvec))
    if angle < 1e-12:
        return np.array([1.0, *(0.5 * rotvec)])
    return np.array([np.cos(angle / 2), *(np.sin(angle / 2) / angle * rotvec)])


def perturb_quat(quat_wxyz: np.ndarray, std_rad: float, rng: np.random.Generator) -> np.ndarray:
    """``quat_wxyz`` rotated (in its body frame) by a random rotation vector of per-axis std ``std_rad``."""
    if std_rad <= 0.0:
        return quat_wxyz
    return quat_multiply(quat_wxyz, quat_from_rotvec(rng.normal(0.0, std_rad, 3)))


def rpy_from_quat(quat_wxyz: np.ndarray) -> tuple[float, float, float]:
    """Roll, pitch, yaw (ZYX Euler, rad), as the G1 IMU reports them."""
    w, x, y, z = quat_wxyz.tolist()
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return roll, pitch, yaw


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """3-vector cross product (``np.cross`` costs ~30 us per call on small vectors)."""
    ax, ay, az = a.tolist()
    bx, by, bz = b.tolist()
    return np.array([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx])
