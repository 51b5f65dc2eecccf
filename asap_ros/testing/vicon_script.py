"""A known rigid-body trajectory for the Vicon SDK stand-in (test support).

Constant linear velocity, constant yaw rate and a fixed 11.5 deg roll, served at ``RATE_HZ``
with chosen frames dropped or occluded, so a test knows the true pose and twist of every frame.
"""

from __future__ import annotations

import numpy as np

from asap_ros.core.quaternion import quat_conjugate, quat_from_yaw, quat_multiply, quat_rotate
from asap_ros.mocap.vicon import ViconSource
from asap_ros.testing import vicon_standin

RATE_HZ = 100.0
LINEAR_MM_S = np.array([500.0, -200.0, 100.0])
START_MM = np.array([1000.0, 2000.0, 800.0])
YAW_RATE = 0.8
TILT = np.array([np.cos(0.1), np.sin(0.1), 0.0, 0.0])  # constant 11.5° roll: body and world axes differ


def true_pose(frame: int) -> tuple[np.ndarray, np.ndarray]:
    """Position (mm) and w-first orientation at a frame number (t = frame / rate)."""
    t = frame / RATE_HZ
    return START_MM + LINEAR_MM_S * t, quat_multiply(quat_from_yaw(YAW_RATE * t), TILT)


def true_twist(frame: int) -> tuple[np.ndarray, np.ndarray]:
    """Body-frame linear (m/s) and angular (rad/s) velocity."""
    _, quat = true_pose(frame)
    linear_body = quat_rotate(quat_conjugate(quat), LINEAR_MM_S / 1000.0)
    angular_body = quat_rotate(quat_conjugate(TILT), np.array([0.0, 0.0, YAW_RATE]))
    return linear_body, angular_body


def script(first: int, count: int, dropped: set[int], occluded: set[int]) -> list[vicon_standin.ScriptedFrame]:
    frames = []
    for n in range(first, first + count):
        if n in dropped:
            continue
        position, quat = true_pose(n)
        frames.append(
            vicon_standin.ScriptedFrame(
                frame_number=n,
                position_mm=tuple(position),
                quat_xyzw=tuple(quat[[1, 2, 3, 0]]),
                occluded=n in occluded,
                latency_s=0.004 + 0.001 * (n % 5),
            )
        )
    return frames


def standin_source(frames, subject="g1", client_subject="g1") -> tuple[ViconSource, vicon_standin.Client]:
    client = vicon_standin.Client(frames, RATE_HZ, client_subject, "g1")
    return ViconSource(vicon_standin, client, "localhost:801", subject, "g1", source="test"), client
