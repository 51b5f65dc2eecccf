"""The velocities ASAP's motion library derives from a motion file, which its trainer resets to.

``torch_humanoid_batch.py`` ``fk_batch(..., return_full=True, dt=1/fps)`` at commit 91df82c:

- root linear velocity (world): ``np.gradient`` of the root position over the rows, divided by
  dt, then a Gaussian filter (sigma 2 rows, truncated at 4 sigma, edges repeated);
- root angular velocity (world): the rotation from row t to row t + 1 (``r[t+1] r[t]^-1``) as
  axis·angle / dt, the last row zero, then the same Gaussian filter;
- joint velocities: forward differences ``(q[t+1] - q[t]) / dt``, unfiltered; the last row
  repeats the second-to-last difference (``torch.cat([dof_vel, dof_vel[:, -2:-1]])``).

The recorded velocities of a recording (mocap fit, LowState dq) are what the robot had; these
are what the trainer uses.
"""

from __future__ import annotations

import numpy as np

from asap_ros.core.quaternion import quat_conjugate, quat_multiply, quat_to_rotvec

FILTER_SIGMA_ROWS = 2.0
FILTER_TRUNCATE = 4.0
"""scipy.ndimage.gaussian_filter1d defaults as ASAP calls it: radius ``int(4 * sigma + 0.5)`` rows."""


def gaussian_filter_rows(values: np.ndarray, sigma: float = FILTER_SIGMA_ROWS) -> np.ndarray:
    """Gaussian filter along axis 0 with the edge rows repeated (scipy's ``mode="nearest"``)."""
    values = np.asarray(values, dtype=np.float64)
    radius = int(FILTER_TRUNCATE * sigma + 0.5)
    offsets = np.arange(-radius, radius + 1)
    weights = np.exp(-0.5 * (offsets / sigma) ** 2)
    weights /= weights.sum()
    padded = np.concatenate([np.repeat(values[:1], radius, axis=0), values, np.repeat(values[-1:], radius, axis=0)])
    out = np.zeros_like(values)
    for w, offset in zip(weights, offsets):
        out += w * padded[radius + offset : radius + offset + len(values)]
    return out


def root_linear_velocity(root_pos: np.ndarray, dt: float) -> np.ndarray:
    """(T, 3) world-frame root velocity, m/s, as the trainer resets to it."""
    return gaussian_filter_rows(np.gradient(np.asarray(root_pos, dtype=np.float64), axis=0) / dt)


def root_angular_velocity(root_quat_wxyz: np.ndarray, dt: float) -> np.ndarray:
    """(T, 3) world-frame root angular velocity, rad/s (rotation between rows by the shortest path)."""
    quat = np.asarray(root_quat_wxyz, dtype=np.float64)
    step = np.zeros((len(quat), 3))
    step[:-1] = quat_to_rotvec(quat_multiply(quat[1:], quat_conjugate(quat[:-1])))
    return gaussian_filter_rows(step / dt)


def joint_velocity(dof: np.ndarray, dt: float) -> np.ndarray:
    """(T, J) joint velocities, rad/s: forward differences, the last row repeating the one before it."""
    diff = np.diff(np.asarray(dof, dtype=np.float64), axis=0) / dt
    return np.concatenate([diff, diff[-2:-1] if len(diff) >= 2 else diff[-1:]])
