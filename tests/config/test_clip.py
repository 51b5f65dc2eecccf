"""Motion clips: the shipped joblib pickles load without joblib; anything but data is refused."""

from __future__ import annotations

import datetime
import io
import pickle
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from asap_ros.config.clip import load_clip, load_pickle_restricted
from asap_ros.core.errors import ConfigError

SHIPPED = {
    "0-TairanTestbed_TairanTestbed_CR7_video_CR7_level1_filter_amass.pkl": 119,
    "0-motions_raw_tairantestbed_smpl_video_kick_level1_filter_amass.pkl": 119,
    "0-motions_raw_tairantestbed_smpl_video_APT_level1_amass.pkl": 230,
}


@pytest.mark.parametrize("file_name,frames", SHIPPED.items())
def test_shipped_clips(assets, file_name, frames):
    clip = load_clip(assets / "motions" / file_name)
    assert clip.name == Path(file_name).stem
    assert clip.fps == 30.0
    assert clip.num_frames == frames
    assert clip.duration_s == pytest.approx((frames - 1) / 30.0)
    assert clip.dof.shape == (frames, 23)
    assert clip.root_pos.shape == (frames, 3)
    assert clip.pose_aa.shape == (frames, 27, 3) and clip.smpl_joints.shape == (frames, 24, 3)
    # the bytes were read at the right offsets: unit quaternions, zero padding rows in pose_aa,
    # a standing pelvis height and joint angles within +-pi
    np.testing.assert_allclose(np.linalg.norm(clip.root_quat_xyzw, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(clip.pose_aa[:, 24:], 0.0)
    assert 0.5 < np.median(clip.root_pos[:, 2]) < 1.1
    assert np.abs(clip.dof).max() < np.pi
    assert clip.action is None


# --- a minimal writer of joblib's format, to test records the shipped files do not contain ------
class _ArrayRecord:
    """Pickled as joblib.numpy_pickle.NumpyArrayWrapper (a stand-in module is registered)."""


_ArrayRecord.__module__ = "joblib.numpy_pickle"
_ArrayRecord.__qualname__ = _ArrayRecord.__name__ = "NumpyArrayWrapper"


@pytest.fixture
def joblib_writer(monkeypatch):
    package, module = types.ModuleType("joblib"), types.ModuleType("joblib.numpy_pickle")
    package.numpy_pickle, module.NumpyArrayWrapper = module, _ArrayRecord
    monkeypatch.setitem(sys.modules, "joblib", package)
    monkeypatch.setitem(sys.modules, "joblib.numpy_pickle", module)

    class Writer(pickle._Pickler):
        """Each ndarray becomes a record followed by a padding byte, padding, then raw bytes."""

        record_overrides: dict = {}

        def save(self, obj, save_persistent_id=True):
            if type(obj) is not np.ndarray:
                return super().save(obj, save_persistent_id)
            order = "F" if obj.flags.f_contiguous and not obj.flags.c_contiguous else "C"
            record = _ArrayRecord()
            record.__dict__.update(
                subclass=np.ndarray, shape=obj.shape, order=order, dtype=obj.dtype,
                allow_mmap=True, numpy_array_alignment_bytes=16,
            )
            record.__dict__.update(self.record_overrides)
            super().save(record)
            self.framer.commit_frame(force=True)
            stream = self.stream
            padding = 16 - (stream.tell() + 1) % 16
            stream.write(bytes([padding]) + b"\xff" * padding)
            stream.write(obj.tobytes(order=order))

    def write(obj, path: Path, **record_overrides) -> Path:
        stream = io.BytesIO()
        writer = Writer(stream, protocol=4)
        writer.stream = stream
        writer.record_overrides = record_overrides
        writer.dump(obj)
        path.write_bytes(stream.getvalue())
        return path

    return write


def test_joblib_format_layouts_and_dtypes(tmp_path, joblib_writer):
    data = {
        "c": np.arange(12, dtype=np.float32).reshape(3, 4),
        "f": np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
        "big_endian": np.arange(5, dtype=">i4"),
        "empty": np.zeros((0, 3)),
        "nested": [np.ones(2), {"x": np.int64(3)}, (1, "a"), {1, 2}],
    }
    loaded = load_pickle_restricted(joblib_writer(data, tmp_path / "a.pkl"))
    for key in ("c", "f", "big_endian", "empty"):
        np.testing.assert_array_equal(loaded[key], data[key])
        assert loaded[key].dtype == data[key].dtype.newbyteorder("=")
    np.testing.assert_array_equal(loaded["nested"][0], np.ones(2))
    assert loaded["nested"][1:] == [{"x": 3}, (1, "a"), {1, 2}]


def test_shipped_clip_rewritten_by_our_writer_reads_back_equal(tmp_path, assets, joblib_writer):
    original = load_pickle_restricted(assets / "motions" / next(iter(SHIPPED)))
    again = load_pickle_restricted(joblib_writer(original, tmp_path / "b.pkl"))
    for name, fields in original.items():
        for key, value in fields.items():
            np.testing.assert_array_equal(again[name][key], value)


def test_joblib_records_of_other_types_are_refused(tmp_path, joblib_writer):
    path = joblib_writer({"a": np.zeros(3)}, tmp_path / "sub.pkl", subclass=np.dtype)
    with pytest.raises(ConfigError, match=r"sub\.pkl: joblib array record: only numpy.ndarray is allowed"):
        load_pickle_restricted(path)
    path = joblib_writer({"a": np.zeros(3)}, tmp_path / "obj.pkl", dtype=np.dtype("O"))
    with pytest.raises(ConfigError, match=r"obj\.pkl: joblib array record: dtype must be a plain numeric"):
        load_pickle_restricted(path)


def test_truncated_joblib_file_is_refused(tmp_path, assets):
    data = (assets / "motions" / next(iter(SHIPPED))).read_bytes()
    path = tmp_path / "cut.pkl"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ConfigError, match=r"cut\.pkl: (array data truncated|not a valid pickle)"):
        load_pickle_restricted(path)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_plain_pickles_of_numpy_arrays(tmp_path, protocol):
    clip = {
        "exported": {
            "root_trans_offset": np.zeros((4, 3)),
            "root_rot": np.tile([0.0, 0.0, 0.0, 1.0], (4, 1)),
            "dof": np.linspace(0, 1, 4 * 23).reshape(4, 23).astype(np.float32),
            "action": np.ones((4, 23), dtype=np.float32),
            "fps": 50.0,
        }
    }
    path = tmp_path / "plain.pkl"
    path.write_bytes(pickle.dumps(clip, protocol=protocol))
    loaded = load_clip(path)
    assert loaded.fps == 50.0 and loaded.num_frames == 4 and loaded.duration_s == pytest.approx(0.06)
    np.testing.assert_array_equal(loaded.dof, clip["exported"]["dof"])
    np.testing.assert_array_equal(loaded.action, 1.0)
    assert loaded.pose_aa is None


# --- malicious and malformed files ---------------------------------------------------------------
class Innocent:
    pass


@pytest.mark.parametrize(
    "payload,global_name",
    [
        (b"cos\nsystem\n(S'touch {marker}'\ntR.", "os.system"),
        (b"cposix\nsystem\n(S'touch {marker}'\ntR.", "posix.system"),
        (b"cbuiltins\neval\n(S'open(\"{marker}\", \"w\")'\ntR.", "builtins.eval"),
        (b"\x80\x04\x8c\x08builtins\x8c\x04exec\x93S'open(\"{marker}\", \"w\")'\x85R.", "builtins.exec"),
        (pickle.dumps({"a": Innocent()}), f"{__name__}.Innocent"),
        (pickle.dumps({"a": Innocent()}, protocol=2), f"{__name__}.Innocent"),
        (pickle.dumps({"a": datetime.date(2020, 1, 1)}), "datetime.date"),
        (b"\x80\x02c__builtin__\nexec\nX\x01\x00\x00\x001\x85R.", "builtins.exec"),
    ],
)
def test_forbidden_globals_are_refused_and_never_run(tmp_path, payload, global_name):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pkl"
    path.write_bytes(payload.replace(b"{marker}", str(marker).encode()))
    with pytest.raises(ConfigError) as info:
        load_pickle_restricted(path)
    message = str(info.value)
    assert str(path) in message and "forbidden global" in message and repr(global_name) in message
    assert not marker.exists()


def test_malformed_files_are_refused(tmp_path):
    cases = {
        "garbage.pkl": (b"this is not a pickle", "not a valid pickle"),
        "empty.pkl": (b"", "not a valid pickle"),
        "zipped.pkl": (b"\x1f\x8b\x08\x00rest", "gzip-compressed pickles are not supported"),
    }
    for name, (content, problem) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ConfigError, match=rf"{name}: {problem}"):
            load_pickle_restricted(tmp_path / name)
    with pytest.raises(ConfigError, match=r"absent\.pkl: cannot read file"):
        load_pickle_restricted(tmp_path / "absent.pkl")


def _clip_fields(frames: int = 5) -> dict:
    return {
        "root_trans_offset": np.zeros((frames, 3)),
        "root_rot": np.tile([0.0, 0.0, 0.0, 1.0], (frames, 1)),
        "dof": np.zeros((frames, 23)),
        "fps": 30,
    }


@pytest.mark.parametrize(
    "edit,key,problem",
    [
        (lambda f: f.pop("dof"), "m.dof", "required array missing"),
        (lambda f: f.update(fps=0), "m.fps", "must be a positive number"),
        (lambda f: f.update(root_rot=np.zeros((5, 3))), "m.root_rot", "must have 4 columns"),
        (lambda f: f.update(root_trans_offset=np.zeros((4, 3))), "m.root_trans_offset", "has 4 frames, dof has 5"),
        (lambda f: f["dof"].__setitem__((2, 2), np.nan), "m.dof", "contains NaN"),
        (lambda f: f.update(dof=[[0.0] * 23] * 5), "m.dof", "must be a 2-D numeric array"),
        (lambda f: f.update(velocity=np.zeros((5, 3))), "m", "unknown clip keys"),
    ],
)
def test_bad_clip_contents_are_refused(tmp_path, edit, key, problem):
    fields = _clip_fields()
    edit(fields)
    path = tmp_path / "clip.pkl"
    path.write_bytes(pickle.dumps({"m": fields}))
    with pytest.raises(ConfigError, match=rf"clip\.pkl: {key}: {problem}"):
        load_clip(path)


def test_clip_selection_by_name(tmp_path):
    path = tmp_path / "two.pkl"
    path.write_bytes(pickle.dumps({"a": _clip_fields(3), "b": _clip_fields(4)}))
    with pytest.raises(ConfigError, match="file holds several clips"):
        load_clip(path)
    assert load_clip(path, "b").num_frames == 4
    with pytest.raises(ConfigError, match=r"no clip of that name .*\(got 'c'\)"):
        load_clip(path, "c")
