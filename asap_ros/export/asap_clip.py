"""``--format asap``: the delta-action trainer's clip pickle.

``{clip_name: {root_trans_offset (T,3) float32, root_rot (T,4) float64 x,y,z,w, dof (T,23)
float32, pose_aa (T,27,3) float32, fps int, action (T,23) float32}}`` sampled at the control
ticks (fps = control rate), dtypes as in ASAP's shipped clips. Root pose from motion capture,
joints from the robot, ``action`` the raw actor output of the same tick.

Written as a plain pickle (protocol 4) of dicts, numpy arrays and an int: no joblib records,
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

from asap_ros.export.align import AlignedEpisode
from asap_ros.export.formats import ExportContext
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
    """The trainer's clip entry of one episode (mocap root position required)."""
    root_pos = aligned.require_root_position("the asap clip format (root_trans_offset)")
    dof = aligned.q[:, ctx.driven_motors]
    return {
        "root_trans_offset": root_pos.astype(np.float32),
        "root_rot": aligned.root_quat_wxyz[:, [1, 2, 3, 0]].astype(np.float64),
        "dof": dof.astype(np.float32),
        "pose_aa": pose_aa(aligned.root_quat_wxyz, dof, ctx.joint_axes).astype(np.float32),
        "fps": ctx.fps,
        "action": aligned.raw_action.astype(np.float32),
    }


def write_pickle(data: object, path: Path) -> None:
    """Write ``data`` atomically (temporary file, then rename) with the portable pickler."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as stream:
        _PortablePickler(stream, protocol=PROTOCOL).dump(data)
    os.replace(tmp, path)


def write_asap_clip(aligned: AlignedEpisode, stem: Path, ctx: ExportContext) -> Path:
    """``<stem>.pkl`` holding ``{stem.name: clip_fields(...)}``."""
    path = stem.with_name(stem.name + SUFFIX)
    write_pickle({stem.name: clip_fields(aligned, ctx)}, path)
    return path
