"""Motion clips (ASAP ``motions/*.pkl``) read with a restricted unpickler.

The clips are joblib pickles: each numpy array is pickled as a
``joblib.numpy_pickle.NumpyArrayWrapper`` record (class, shape, order, dtype) whose raw bytes
follow in the stream right after the record, preceded by one byte giving the length of the
alignment padding (``0xff`` bytes) that joblib >= 1.2 writes. Plain pickles of numpy arrays
(what our exporter writes) are read too.

Unpickling can run arbitrary code, so only numpy arrays, dtypes, numpy scalars and plain
containers may be built; any other global (``os.system``, ``builtins.eval``, arbitrary classes)
is refused with a :class:`ConfigError` naming the file and the global. joblib is not needed.
"""

from __future__ import annotations

import _compat_pickle
import codecs
import io
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy._core import multiarray as _multiarray
from numpy._core import numeric as _numeric

from asap_ros.core.errors import ConfigError


class _JoblibArrayRecord:
    """Stand-in for ``joblib.numpy_pickle.NumpyArrayWrapper``; BUILD fills its ``__dict__``
    (subclass, shape, order, dtype, allow_mmap, numpy_array_alignment_bytes)."""


def _latin1_encode(text: str, encoding: str) -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for bytes, restricted to latin-1."""
    if encoding != "latin1" or not isinstance(text, str):
        raise pickle.UnpicklingError(f"_codecs.encode only allowed for latin1 text, got {encoding!r}")
    return codecs.encode(text, encoding)


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("joblib.numpy_pickle", "NumpyArrayWrapper"): _JoblibArrayRecord,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("_codecs", "encode"): _latin1_encode,
}
for _module in ("numpy.core", "numpy._core"):
    _ALLOWED_GLOBALS[(f"{_module}.multiarray", "_reconstruct")] = _multiarray._reconstruct
    _ALLOWED_GLOBALS[(f"{_module}.multiarray", "scalar")] = _multiarray.scalar
    _ALLOWED_GLOBALS[(f"{_module}.numeric", "_frombuffer")] = _numeric._frombuffer

_COMPRESSED_MAGIC = {b"ZF": "joblib zlib", b"\x78": "zlib", b"\x1f\x8b": "gzip", b"BZ": "bz2", b"\xfd7zXZ": "xz"}


class _RestrictedUnpickler(pickle._Unpickler):
    """Pure-python unpickler that builds only allowed globals and reads joblib array records."""

    dispatch = pickle._Unpickler.dispatch.copy()

    def __init__(self, stream: io.BufferedIOBase, source: Path):
        super().__init__(stream)
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        if self.proto < 3:  # Python 2 names, as pickle.Unpickler(fix_imports=True) maps them
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise ConfigError(
                self.source,
                None,
                "pickle tries to build a forbidden global (only numpy arrays and plain containers are allowed)",
                f"{module}.{name}",
            ) from None

    def _load_build(self) -> None:
        pickle._Unpickler.load_build(self)
        if isinstance(self.stack[-1], _JoblibArrayRecord):
            self.stack[-1] = self._read_joblib_array(self.stack[-1])

    dispatch[pickle.BUILD[0]] = _load_build

    def _read_joblib_array(self, record: _JoblibArrayRecord) -> np.ndarray:
        """Read the raw bytes that follow a joblib array record (after its alignment padding)."""
        state = vars(record)
        if state.get("subclass") is not np.ndarray:
            raise ConfigError(
                self.source, None, "joblib array record: only numpy.ndarray is allowed", state.get("subclass")
            )
        dtype, order, shape = state.get("dtype"), state.get("order"), state.get("shape")
        if not isinstance(dtype, np.dtype) or dtype.hasobject:
            problem = "joblib array record: dtype must be a plain numeric numpy dtype"
            raise ConfigError(self.source, None, problem, dtype)
        if order not in ("C", "F"):
            raise ConfigError(self.source, None, "joblib array record: order must be 'C' or 'F'", order)
        if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ConfigError(self.source, None, "joblib array record: bad shape", shape)
        if state.get("numpy_array_alignment_bytes") is not None:
            padding = self.read(1)[0]
            self.read(padding)
        count = int(np.prod(shape, dtype=np.int64))
        size = count * dtype.itemsize
        data = self.read(size)
        if len(data) != size:
            raise ConfigError(self.source, None, "array data truncated", f"{len(data)} of {size} bytes")
        array = np.frombuffer(data, dtype=dtype, count=count).copy()
        array = array.reshape(shape[::-1]).T if order == "F" else array.reshape(shape)
        return array.astype(dtype.newbyteorder("="), copy=False)


def load_pickle_restricted(path: str | Path) -> object:
    """Unpickle ``path`` allowing only numpy arrays/dtypes/scalars and plain containers.

    Reads joblib's uncompressed format and plain pickles. Anything else is a
    :class:`ConfigError` naming the file (and, for forbidden globals, the global).
    """
    path = Path(path)
    try:
        with path.open("rb") as stream:
            head = stream.peek(5)[:5]
            for magic, kind in _COMPRESSED_MAGIC.items():
                if head.startswith(magic):
                    raise ConfigError(path, None, f"{kind}-compressed pickles are not supported; store it uncompressed")
            return _RestrictedUnpickler(stream, path).load()
    except ConfigError:
        raise
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read file: {exc.strerror or exc}") from exc
    except Exception as exc:  # malformed stream: pickle raises many exception types
        raise ConfigError(path, None, f"not a valid pickle: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class MotionClip:
    """One reference motion (root pose, joint angles) sampled at ``fps``."""

    name: str
    fps: float
    root_pos: np.ndarray
    """(T, 3) root position, from ``root_trans_offset``."""
    root_quat_xyzw: np.ndarray
    """(T, 4) root orientation, x, y, z, w."""
    dof: np.ndarray
    """(T, J) joint angles; ASAP clips: the 23 driven joints in motor order (motors 0-18, 22-25)."""
    pose_aa: np.ndarray | None = None
    smpl_joints: np.ndarray | None = None
    action: np.ndarray | None = None
    """(T, J) raw actor output, present in clips exported from recordings."""

    @property
    def num_frames(self) -> int:
        return int(self.dof.shape[0])

    @property
    def duration_s(self) -> float:
        """Time from the first to the last frame, ``(N - 1) / fps``."""
        return (self.num_frames - 1) / self.fps


_CLIP_ARRAYS = {"root_trans_offset": 3, "root_rot": 4, "dof": None, "action": None}
_SAVED_MOTION_KEYS = {"actor_obs", "terminate", "root_lin_vel", "root_ang_vel", "dof_vel", "motion_times"}
"""Further keys of motions ASAP saves from a rollout (``motions_for_saving``) and of ``asap-ros export``
files (with ``action_executed`` and ``gyro``): accepted, not read."""
_CLIP_KEYS = set(_CLIP_ARRAYS) | {"pose_aa", "smpl_joints", "fps", "action_executed", "gyro"} | _SAVED_MOTION_KEYS


def load_clip(path: str | Path, name: str | None = None) -> MotionClip:
    """Load one clip from a ``{clip_name: {...}}`` pickle (``name`` needed if it holds several)."""
    path = Path(path)
    data = load_pickle_restricted(path)
    if not isinstance(data, dict) or not data:
        raise ConfigError(path, None, "expected a non-empty {clip_name: {...}} mapping", type(data).__name__)
    if name is None:
        if len(data) != 1:
            raise ConfigError(path, None, "file holds several clips; name the one to load", sorted(data))
        name = next(iter(data))
    if name not in data:
        raise ConfigError(path, None, f"no clip of that name (clips: {', '.join(map(str, data))})", name)
    fields = data[name]
    if not isinstance(fields, dict):
        raise ConfigError(path, name, "clip entry must be a mapping", type(fields).__name__)
    unknown = sorted(set(fields) - _CLIP_KEYS)
    if unknown:
        raise ConfigError(path, name, "unknown clip keys", unknown)
    fps = fields.get("fps")
    if isinstance(fps, bool) or not isinstance(fps, (int, float, np.number)) or not fps > 0:
        raise ConfigError(path, f"{name}.fps", "must be a positive number", fps)
    arrays = {}
    for key, width in _CLIP_ARRAYS.items():
        if key not in fields:
            if key == "action":
                continue
            raise ConfigError(path, f"{name}.{key}", "required array missing")
        arrays[key] = _float_array(path, f"{name}.{key}", fields[key], width)
    num_frames = arrays["dof"].shape[0]
    if num_frames < 2:
        raise ConfigError(path, f"{name}.dof", "a clip needs at least 2 frames", num_frames)
    optional = {
        k: _float_array(path, f"{name}.{k}", fields[k], None, ndim=3) for k in ("pose_aa", "smpl_joints") if k in fields
    }
    for key, array in {**arrays, **optional}.items():
        if array.shape[0] != num_frames:
            raise ConfigError(path, f"{name}.{key}", f"has {array.shape[0]} frames, dof has {num_frames}", array.shape)
    return MotionClip(
        name=str(name),
        fps=float(fps),
        root_pos=arrays["root_trans_offset"],
        root_quat_xyzw=arrays["root_rot"],
        dof=arrays["dof"],
        pose_aa=optional.get("pose_aa"),
        smpl_joints=optional.get("smpl_joints"),
        action=arrays.get("action"),
    )


def _float_array(path: Path, key: str, value: Any, width: int | None, ndim: int = 2) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.ndim != ndim or value.dtype.kind not in "fiu":
        shape = getattr(value, "shape", type(value).__name__)
        raise ConfigError(path, key, f"must be a {ndim}-D numeric array", shape)
    if width is not None and value.shape[1] != width:
        raise ConfigError(path, key, f"must have {width} columns", value.shape)
    if not np.all(np.isfinite(value)):
        raise ConfigError(path, key, "contains NaN or infinite values")
    array = value.astype(np.float64)
    array.setflags(write=False)
    return array
