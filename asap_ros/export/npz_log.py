"""``--format npz``: ASAP's real-robot logger keys, one row per control tick, plus what it lacked.

ASAP's logger keys (G1 motor order, 29 joints; quaternions w, x, y, z): ``time`` (s, system
clock), ``joint_pos``, ``joint_vel``, ``tau_est``, ``IMU_quaternion``, ``IMU_gyro``,
``IMU_acc``, ``joint_pos_cmd``, ``joint_vel_cmd``, ``kp``, ``kd``, ``tau_cmd``, ``pos``,
``quat``, ``lin_vel``, ``ang_vel`` (root from motion capture; velocities in the body frame,
as ``nav_msgs/Odometry`` puts the twist in the child frame). Added: ``phase``,
``observation``, ``raw_action``, ``q_target``, ``tick``, ``joint_names``, ``root_source`` and
the source stamps (ns) of every row (``root_stamp_ns``: the mocap sample nearest the tick), and
``fault_latched``: the row of the step on which a fault latched (its command is the damping
command, its ``raw_action`` the rejected output).
Without mocap ``quat`` / ``ang_vel`` come from the IMU and ``pos`` / ``lin_vel`` are NaN
(``root_source`` = ``imu``). Schema: ``docs/export.md``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asap_ros.export.align import AlignedEpisode
from asap_ros.export.formats import ExportContext, write_npz

SUFFIX = ".npz"
ASAP_LOGGER_KEYS = (
    "time", "joint_pos", "joint_vel", "tau_est", "IMU_quaternion", "IMU_gyro", "IMU_acc",
    "joint_pos_cmd", "joint_vel_cmd", "kp", "kd", "tau_cmd", "pos", "quat", "lin_vel", "ang_vel",
)  # fmt: skip


def _or_nan(values: np.ndarray | None, rows: int) -> np.ndarray:
    return values if values is not None else np.full((rows, 3), np.nan)


def log_arrays(aligned: AlignedEpisode, ctx: ExportContext) -> dict[str, np.ndarray]:
    """All npz keys of one episode."""
    rows = len(aligned)
    steps = aligned.episode.steps
    return {
        "time": aligned.time_ns / 1e9,
        "joint_pos": aligned.q,
        "joint_vel": aligned.dq,
        "tau_est": aligned.tau_est,
        "IMU_quaternion": aligned.imu_quat_wxyz,
        "IMU_gyro": aligned.gyro,
        "IMU_acc": aligned.acc,
        "joint_pos_cmd": aligned.cmd_q,
        "joint_vel_cmd": aligned.cmd_dq,
        "kp": aligned.cmd_kp,
        "kd": aligned.cmd_kd,
        "tau_cmd": aligned.cmd_tau,
        "pos": _or_nan(aligned.root_pos, rows),
        "quat": aligned.root_quat_wxyz,
        "lin_vel": _or_nan(aligned.root_lin_vel_body, rows),
        "ang_vel": aligned.root_ang_vel_body,
        "phase": aligned.phase,
        "observation": aligned.obs,
        "raw_action": aligned.raw_action,
        "q_target": aligned.q_target,
        "tick": aligned.tick,
        "lowstate_stamp_ns": aligned.time_ns,
        "lowcmd_stamp_ns": aligned.cmd_stamp_ns,
        "root_stamp_ns": aligned.root_stamp_ns,
        "policy_stamp_ns": np.asarray(steps.stamp_ns, dtype=np.int64),
        "fault_latched": np.asarray(steps.fault_latched, dtype=bool),
        "joint_names": np.array(ctx.robot.joint_names),
        "root_source": np.array(aligned.root_source),
    }


def write_npz_log(aligned: AlignedEpisode, stem: Path, ctx: ExportContext) -> Path:
    """``<stem>.npz`` (uncompressed; loads with ``np.load(path)``, no pickle needed)."""
    return write_npz(log_arrays(aligned, ctx), stem, SUFFIX)
