"""Quaternion helpers, the package's one implementation: (w, x, y, z), Hamilton convention,
vectorised over leading axes (a single quaternion is shape (4,))."""

from __future__ import annotations

import math

import numpy as np


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a ⊗ b``."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, dtype=np.float64), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, dtype=np.float64), -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_multiply_one(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a ⊗ b`` of two single quaternions (4,), in scalar arithmetic: the
    control step's form (:func:`quat_multiply` vectorises, at ~20x the cost for one pair)."""
    aw, ax, ay, az = np.asarray(a, dtype=np.float64).tolist()
    bw, bx, by, bz = np.asarray(b, dtype=np.float64).tolist()
    return np.array([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ])  # fmt: skip


def gravity_in_body(quat_wxyz: np.ndarray, out: np.ndarray) -> np.ndarray:
    """World gravity direction (0, 0, -1) in the body frame, R(q)^T g, written into ``out`` [3]."""
    w, x, y, z = np.asarray(quat_wxyz, dtype=np.float64).tolist()
    out[0] = 2.0 * (w * y - x * z)
    out[1] = -2.0 * (w * x + y * z)
    out[2] = 1.0 - 2.0 * (w * w + z * z)
    return out


def quat_conjugate(q: np.ndarray) -> np.ndarray:
    result: np.ndarray = np.asarray(q, dtype=np.float64) * np.array([1.0, -1.0, -1.0, -1.0])
    return result


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``q`` (..., 4)."""
    q = np.asarray(q, dtype=np.float64)
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_to_rotvec(q: np.ndarray) -> np.ndarray:
    """Rotation vector (axis·angle, angle in [0, π]) of unit quaternions."""
    q = np.asarray(q, dtype=np.float64)
    q = np.where(q[..., :1] < 0.0, -q, q)
    sin_half = np.linalg.norm(q[..., 1:], axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(sin_half, q[..., :1])
    scale = np.where(sin_half > 1e-12, angle / np.maximum(sin_half, 1e-12), 2.0)
    return q[..., 1:] * scale


def quat_from_yaw(yaw: np.ndarray | float) -> np.ndarray:
    half = 0.5 * np.asarray(yaw, dtype=np.float64)
    zero = np.zeros_like(half)
    return np.stack([np.cos(half), zero, zero, np.sin(half)], axis=-1)


def yaw_of(q: np.ndarray) -> np.ndarray:
    """Heading: angle of the body x axis projected on the world xy plane."""
    x_axis = quat_rotate(q, np.array([1.0, 0.0, 0.0]))
    result: np.ndarray = np.arctan2(x_axis[..., 1], x_axis[..., 0])
    return result


def quat_slerp(a: np.ndarray, b: np.ndarray, fraction: np.ndarray) -> np.ndarray:
    """Shortest-path spherical interpolation, ``fraction`` (...,) in [0, 1]."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    t = np.asarray(fraction, dtype=np.float64)[..., None]
    dot = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(dot < 0.0, -b, b)
    dot = np.abs(dot)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    sin_theta = np.sin(theta)
    near = sin_theta < 1e-9
    safe = np.where(near, 1.0, sin_theta)
    wa = np.where(near, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    wb = np.where(near, t, np.sin(t * theta) / safe)
    out = wa * a + wb * b
    result: np.ndarray = out / np.linalg.norm(out, axis=-1, keepdims=True)
    return result


def xyzw_to_wxyz(q: np.ndarray) -> np.ndarray:
    return np.asarray(q, dtype=np.float64)[..., [3, 0, 1, 2]]


def quat_from_rotvec(rotvec: np.ndarray) -> np.ndarray:
    """Unit quaternions of rotation vectors (axis·angle), the inverse of :func:`quat_to_rotvec`."""
    rotvec = np.asarray(rotvec, dtype=np.float64)
    angle = np.linalg.norm(rotvec, axis=-1, keepdims=True)
    half = 0.5 * angle
    scale = np.where(angle < 1e-12, 0.5, np.sin(half) / np.maximum(angle, 1e-12))
    return np.concatenate([np.cos(half), rotvec * scale], axis=-1)


def rpy_from_quat(quat_wxyz: np.ndarray) -> tuple[float, float, float]:
    """Roll, pitch, yaw (ZYX Euler, rad) of one quaternion, as the G1 IMU reports them."""
    w, x, y, z = np.asarray(quat_wxyz, dtype=np.float64).tolist()
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return roll, pitch, yaw


def body_rates(quat_wxyz: np.ndarray, fps: float) -> np.ndarray:
    """Body-frame angular velocity (rad/s) between consecutive orientations [N, 4] sampled at
    ``fps`` (small-angle, shortest path); [N - 1, 3]."""
    relative = quat_multiply(quat_conjugate(quat_wxyz[:-1]), quat_wxyz[1:])
    result: np.ndarray = 2.0 * np.sign(relative[:, :1]) * relative[:, 1:] * fps
    return result


def matrix_to_quat_wxyz(rotation: np.ndarray) -> np.ndarray:
    """One 3x3 rotation -> unit quaternion (w, x, y, z), w >= 0."""
    m = np.asarray(rotation, dtype=np.float64)
    w = math.sqrt(max(0.0, 1.0 + m[0, 0] + m[1, 1] + m[2, 2])) / 2.0
    x = math.copysign(math.sqrt(max(0.0, 1.0 + m[0, 0] - m[1, 1] - m[2, 2])) / 2.0, m[2, 1] - m[1, 2])
    y = math.copysign(math.sqrt(max(0.0, 1.0 - m[0, 0] + m[1, 1] - m[2, 2])) / 2.0, m[0, 2] - m[2, 0])
    z = math.copysign(math.sqrt(max(0.0, 1.0 - m[0, 0] - m[1, 1] + m[2, 2])) / 2.0, m[1, 0] - m[0, 1])
    quat = np.array([w, x, y, z])
    result: np.ndarray = quat / np.linalg.norm(quat)
    return result


def quat_wxyz_matrix(quat_wxyz: np.ndarray) -> np.ndarray:
    """One quaternion (w, x, y, z; normalised here) -> 3x3 rotation."""
    q = np.asarray(quat_wxyz, dtype=np.float64)
    w, x, y, z = (q / np.linalg.norm(q)).tolist()
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip
