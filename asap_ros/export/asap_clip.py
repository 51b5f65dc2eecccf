"""``--format asap``: the delta-action trainer's motion pickle, rows as ASAP saves its own.

ASAP saves a motion after every physics step (``motions_for_saving``,
``humanoidverse/envs/motion_tracking/motion_tracking.py`` lines 81-82 and 488-538 at commit
91df82c): row i holds the state reached by step i, the action of step i that led there, the
actor observation of that state and its motion time. Here row i is transition i of
:mod:`asap_ros.export.pairing`: the state and observation of actor step i + 1 with the action
of step i. ``{key: {...}}`` holds every key of ``motions_for_saving`` in its dtype (float32;
``terminate`` int64; ``fps`` a float, ``1 / dt``) plus ``action_executed`` and ``gyro`` (the IMU's
angular velocity, pelvis frame: what a reset from measurements uses); root velocities in the
world frame, root pose from motion capture, joints from the robot.

Written as a plain pickle (protocol 4) of dicts, numpy arrays and a float: no joblib records,
so :func:`asap_ros.config.clip.load_pickle_restricted` (numpy only) and ``joblib.load`` both read it.
Arrays are referenced as ``numpy.core.multiarray._reconstruct``, the name numpy 1.x (ASAP's
Python 3.8 training environment) and numpy 2.x both resolve.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
from numpy._core import multiarray as _multiarray

from asap_ros.core.quaternion import quat_rotate
from asap_ros.export.align import AlignedEpisode
from asap_ros.export.formats import ExportContext
from asap_ros.export.pairing import transitions
from asap_ros.export.pose_aa import pose_aa

SUFFIX = ".pkl"
PROTOCOL = 4
_PORTABLE_GLOBALS = {id(_multiarray._reconstruct): b"numpy.core.multiarray\n_reconstruct\n"}


class _PortablePickler(pickle._Pickler):
    """Pickler that names numpy's array reconstructor by its numpy-1-compatible path."""

    def save_global(self, obj: object, name: str | None = None) -> None:
        portable = _PORTABLE_GLOBALS.get(id(obj))
        if portable is None:
            super().save_global(obj, name)
            return
        self.write(pickle.GLOBAL + portable)
        self.memoize(obj)


def clip_fields(aligned: AlignedEpisode, ctx: ExportContext) -> dict[str, object]:
    """The trainer's motion entry of one episode (mocap root position required)."""
    root_pos = aligned.require_root_position("the asap clip format (root_trans_offset)")
    rows = transitions(aligned, continuous=True)
    state, step = rows.result, rows.action
    quat = aligned.root_quat_wxyz[state]
    dof = aligned.q[state][:, ctx.driven_motors].astype(np.float32)
    action, executed = ctx.actions(aligned.raw_action[step], aligned.q_target[step])
    fields = {
        "root_trans_offset": root_pos[state],
        "pose_aa": pose_aa(quat, dof, ctx.joint_axes),
        "dof": dof,
        "root_rot": quat[:, [1, 2, 3, 0]],
        "actor_obs": aligned.obs[state],
        "action": action,
        "terminate": rows.terminate,
        "root_lin_vel": aligned.root_lin_vel_world[state],
        "root_ang_vel": quat_rotate(quat, aligned.root_ang_vel_body[state]),
        "dof_vel": aligned.dq[state][:, ctx.driven_motors],
        "motion_times": ctx.facts.motion_times(aligned.tick[state]),
        "action_executed": executed,
        "gyro": aligned.gyro[state],
    }
    arrays = {k: v if k == "terminate" else np.asarray(v, dtype=np.float32) for k, v in fields.items()}
    return {**arrays, "fps": ctx.facts.fps}


def write_pickle(data: object, path: Path) -> None:
    """Write ``data`` atomically (temporary file, then rename) with the portable pickler."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as stream:
        _PortablePickler(stream, protocol=PROTOCOL).dump(data)
    os.replace(tmp, path)


def write_asap_clip(aligned: AlignedEpisode, stem: Path, ctx: ExportContext) -> Path:
    """``<stem>.pkl`` holding ``{stem.name: clip_fields(...)}`` (``stem.name`` has no dot: the key
    ASAP's directory loader derives from the file name, the name cut at its first dot)."""
    if "." in stem.name:
        raise ValueError(f"clip stem {stem.name!r} has a dot: ASAP would key the file {stem.name.split('.')[0]!r}")
    path = stem.with_name(stem.name + SUFFIX)
    write_pickle({stem.name: clip_fields(aligned, ctx)}, path)
    return path
