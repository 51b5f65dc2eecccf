"""What a fault, an older recording and the joint-limit clamp do to the exports.

- The step on which a fault latched is marked in the bag (``fault_latched``); its rejected action
  and its damping command are in no ``asap`` or ``delta`` row, the transition into its state is
  flagged ``terminate``, and the ``npz`` log flags its row.
- A bag recorded before ``PolicyStep`` had ``fault_latched`` (written here by re-serialising a
  session with that older definition) is read with its own embedded definition: the same
  exports, and a note; a definition lacking a field the export needs is a clear error.
- Targets clamped to the joint limits are counted per joint, ``action_executed`` is their
  raw-equivalent and ``--action executed`` puts it in ``action``.
"""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from asap_ros.cli import main
from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError
from asap_ros.export.exporter import export_bag
from asap_ros.recording.info import bag_info
from asap_ros.recording.msgdefs import ASAP_ROS
from asap_ros.testing.synthetic_bags import SyntheticMotion, SyntheticPlan, write_synthetic_session
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

POLICY_STEP = "asap_ros/msg/PolicyStep"
STEPS_BEFORE_FAULT = 50


@pytest.fixture(scope="module")
def robot():
    return load_robot_model()


@pytest.fixture(scope="module")
def fault_bag(tmp_path_factory, robot, assets) -> Path:
    """One completed run, then one whose actor output fails the check halfway (tick 50)."""
    plan = SyntheticPlan(episodes=2, episode_s=2.0, fault_last=True, log_batch_ms=4.0)
    return write_synthetic_session(tmp_path_factory.mktemp("bags") / "fault", plan, robot.default_q)


def export_all(bag: Path, out: Path, **options) -> dict[str, Path]:
    records = export_bag(bag, out, ["asap", "npz", "delta"], progress=False, **options)
    return {Path(f).name.split(".", 1)[1] + str(r.episode): Path(f) for r in records for f in r.files}


def entry(path: Path) -> dict:
    (value,) = pickle.loads(path.read_bytes()).values()
    return value


@pytest.fixture(scope="module")
def fault_export(fault_bag, tmp_path_factory) -> dict[str, Path]:
    return export_all(fault_bag, tmp_path_factory.mktemp("export"))


def test_bag_marks_the_step_on_which_the_fault_latched(fault_bag):
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    with next(fault_bag.glob("*.mcap")).open("rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        steps = [m for _, _, _, m in reader.iter_decoded_messages(topics=["/asap/policy_step"])]
    (marked,) = [m for m in steps if m.fault_latched]
    assert marked.mode == "DAMPING" and marked.motion == "CR7_level1" and marked.motion_tick == STEPS_BEFORE_FAULT
    assert np.isnan(marked.raw_action).all() and not any(marked.q_target)  # rejected output, damping command
    assert f"damping latched at: control tick {marked.control_tick}" in bag_info(fault_bag).to_text()


def test_fault_step_is_in_no_asap_or_delta_row(fault_export):
    clip = entry(fault_export["pkl2"])
    rows = STEPS_BEFORE_FAULT  # transitions 0->1 ... 49->50: the last one into the fault step's state
    assert clip["action"].shape == (rows, 23)
    assert all(np.isfinite(v).all() for k, v in clip.items() if k != "fps")
    np.testing.assert_array_equal(clip["action"], SyntheticMotion.raw_action(np.arange(rows)))
    np.testing.assert_array_equal(clip["terminate"], np.r_[np.zeros(rows - 1, np.int64), 1])
    delta = np.load(fault_export["delta.npz2"])
    assert len(delta["action"]) == rows and np.isfinite(delta["action"]).all()
    np.testing.assert_array_equal(delta["terminate"], clip["terminate"])
    derivable = delta["delta_input_available"]
    assert np.isfinite(delta["delta_input"][:, derivable]).all()
    assert np.isfinite(delta["next_delta_input"][:-1, derivable]).all()  # NaN only next to terminate: the rejected a


def test_npz_flags_the_fault_row(fault_export):
    log = np.load(fault_export["npz2"])
    assert log["fault_latched"].tolist() == [False] * STEPS_BEFORE_FAULT + [True]
    assert log["kp"][-1].max() == 0 and np.isnan(log["raw_action"][-1]).all()
    assert not np.load(fault_export["npz1"])["fault_latched"].any()


def test_completed_run_ends_with_terminate(fault_export):
    clip = entry(fault_export["pkl1"])
    assert clip["terminate"].tolist() == [0] * 98 + [1]


def test_export_notes_the_fault(fault_bag, tmp_path, capsys):
    assert main(["export", str(fault_bag), "--out", str(tmp_path), "--episode", "2", "-j", "1"]) == 0
    out = capsys.readouterr().out
    assert "a fault latched on tick 50" in out and "flagged terminate" in out


# --- a bag recorded before fault_latched ----------------------------------------------------------------------


def older_definition() -> str:
    return "".join(line for line in ASAP_ROS[POLICY_STEP].splitlines(keepends=True) if "fault_latched" not in line)


def rewrite_policy_steps(bag: Path, out: Path, definition: str, renamed: dict[str, str] | None = None) -> Path:
    """A copy of ``bag`` whose PolicyStep messages use ``definition`` (fields it lacks are dropped,
    ``renamed``: {its field: the current field} filled from another)."""
    from mcap.reader import make_reader
    from mcap.writer import Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from asap_ros.recording.typestore import recording_typestore

    current, older = recording_typestore(), get_typestore(Stores.ROS2_KILTED)
    older.register(get_types_from_msg(definition, POLICY_STEP))
    names = [name for name, _ in older.fielddefs[POLICY_STEP][1]]
    out.mkdir()
    for file in sorted(bag.glob("*.mcap")):
        with file.open("rb") as source, (out / file.name).open("wb") as target:
            writer = Writer(target)
            writer.start(profile="ros2", library="older asap_ros")
            schemas, channels = {}, {}
            for schema, channel, message in make_reader(source).iter_messages(log_time_order=False):
                if schema.id not in schemas:
                    data = definition.encode() if schema.name == POLICY_STEP else schema.data
                    schemas[schema.id] = writer.register_schema(schema.name, schema.encoding, data)
                if channel.id not in channels:
                    channels[channel.id] = writer.register_channel(channel.topic, channel.message_encoding,
                                                                   schemas[schema.id], channel.metadata)  # fmt: skip
                data = message.data
                if schema.name == POLICY_STEP:
                    step = current.deserialize_cdr(data, POLICY_STEP)
                    kept = older.types[POLICY_STEP](**{n: getattr(step, (renamed or {}).get(n, n)) for n in names})
                    data = bytes(older.serialize_cdr(kept, POLICY_STEP))
                writer.add_message(channels[channel.id], message.log_time, data, message.publish_time)
            writer.finish()
    shutil.copy(bag / "metadata.yaml", out / "metadata.yaml")
    return out


@pytest.fixture(scope="module")
def older_bag(fault_bag, tmp_path_factory) -> Path:
    return rewrite_policy_steps(fault_bag, tmp_path_factory.mktemp("older") / "fault", older_definition())


def test_older_bag_exports_the_same_rows(older_bag, fault_export, tmp_path):
    older = export_all(older_bag, tmp_path)
    for name, path in fault_export.items():
        if name.startswith("pkl"):
            new, old = entry(path), entry(older[name])
            assert set(new) == set(old)
            for key in new:
                np.testing.assert_array_equal(old[key], new[key], err_msg=f"{name} {key}")
        else:
            new, old = np.load(path), np.load(older[name])
            for key in new.files:
                np.testing.assert_array_equal(old[key], new[key], err_msg=f"{name} {key}")


def test_older_bag_says_what_it_lacks(older_bag, tmp_path, capsys):
    assert "damping latched at: not marked" in bag_info(older_bag).to_text()
    assert main(["export", str(older_bag), "--out", str(tmp_path), "-j", "1"]) == 0
    assert "recorded without fault_latched (an older version)" in capsys.readouterr().out
    crashed = tmp_path / "crashed"  # its recorder died: no metadata.yaml, the file cut mid-chunk
    crashed.mkdir()
    for file in older_bag.glob("*.mcap"):
        data = file.read_bytes()
        (crashed / file.name).write_bytes(data[: len(data) * 3 // 4])
    repaired = tmp_path / "repaired"
    assert main(["bag", "repair", str(crashed), "--out", str(repaired)]) == 0
    assert "damping latched at: not marked" in bag_info(repaired).to_text()
    assert main(["export", str(repaired), "--out", str(tmp_path / "out"), "--format", "npz", "-j", "1"]) == 0


def test_a_layout_without_what_the_export_needs_is_a_clear_error(fault_bag, tmp_path):
    foreign = ASAP_ROS[POLICY_STEP].replace("float32[] raw_action", "float32[] action")
    bag = rewrite_policy_steps(fault_bag, tmp_path / "foreign", foreign, {"action": "raw_action"})
    with pytest.raises(ConfigError, match=r"/asap/policy_step.*cannot decode asap_ros/msg/PolicyStep.*'raw_action'"):
        export_bag(bag, tmp_path / "out", ["asap"], progress=False)


# --- joint-limit clamps ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clamped_bag(tmp_path_factory, robot, assets) -> Path:
    """Raw actions of amplitude 6 (targets up to 1.5 rad off the default pose), clamped like the runtime."""
    plan = SyntheticPlan(episodes=1, episode_s=1.0, action_amplitude=6.0)
    return write_synthetic_session(tmp_path_factory.mktemp("bags") / "clamped", plan, robot.default_q,
                                   (robot.q_lower, robot.q_upper))  # fmt: skip


def expected_clamps(robot, ticks: int) -> tuple[np.ndarray, np.ndarray]:
    """(ticks, 23) clamped mask and executed raw-equivalent, from the runtime's rule."""
    raw = SyntheticMotion.raw_action(np.arange(ticks), 6.0).astype(np.float64)
    default = robot.default_q[DRIVEN_MOTORS]
    wanted = default + 0.25 * raw
    executed = np.clip(wanted, robot.q_lower[DRIVEN_MOTORS], robot.q_upper[DRIVEN_MOTORS])
    return wanted != executed, (executed.astype(np.float32) - default) / 0.25


def test_clamps_are_counted_per_joint(clamped_bag, robot, tmp_path, capsys):
    assert main(["export", str(clamped_bag), "--out", str(tmp_path), "-j", "1"]) == 0
    out = capsys.readouterr().out
    clamped, _ = expected_clamps(robot, 50)
    names = [robot.joint_names[i] for i in DRIVEN_MOTORS]
    assert clamped.any(axis=1).sum() > 0
    assert f"targets clamped to the joint limits: {clamped.any(axis=1).sum()} of 50 ticks" in out
    for j in np.flatnonzero(clamped.any(axis=0)):
        assert f"{names[j]:<28} {clamped[:, j].sum():>5} ticks" in out
    meta = next(tmp_path.glob("*.meta.json")).read_text()
    assert '"clamped_ticks"' in meta


def test_action_executed_and_the_action_choice(clamped_bag, robot, tmp_path):
    clamped, executed = expected_clamps(robot, 50)
    raw_clip = entry(next(Path(export_all(clamped_bag, tmp_path / "raw")["pkl1"]).parent.glob("*.pkl")))
    chosen = entry(export_all(clamped_bag, tmp_path / "executed", action="executed")["pkl1"])
    np.testing.assert_array_equal(raw_clip["action"], SyntheticMotion.raw_action(np.arange(49), 6.0))
    np.testing.assert_allclose(raw_clip["action_executed"], executed[:-1], atol=1e-5)
    np.testing.assert_array_equal(chosen["action"], chosen["action_executed"])
    np.testing.assert_array_equal(chosen["action_executed"], raw_clip["action_executed"])
    differs = np.abs(raw_clip["action"] - raw_clip["action_executed"]) > 1e-4
    np.testing.assert_array_equal(differs, clamped[:-1])
    delta = np.load(next((tmp_path / "executed").glob("*.delta.npz")))
    np.testing.assert_array_equal(delta["action"], delta["action_executed"])


def test_action_choice_is_checked(clamped_bag, tmp_path):
    with pytest.raises(ConfigError, match="--action"):
        export_bag(clamped_bag, tmp_path, ["asap"], progress=False, action="clamped")
