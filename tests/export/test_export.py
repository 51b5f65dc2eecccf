"""``asap-ros export`` on synthetic session bags (recorder layout, known motion).

The bags are written with the recorder's own ``BagWriter`` (asap_ros.testing.synthetic_bags) and
every check reads them back independently where it matters (``mcap`` + ``mcap-ros2-support``).
"""

from __future__ import annotations

import json
import pickle
import pickletools
from pathlib import Path

import numpy as np
import pytest

from asap_ros.cli import main
from asap_ros.config.clip import load_clip, load_pickle_restricted
from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError
from asap_ros.core.quaternion import xyzw_to_wxyz
from asap_ros.export.align import align_episode
from asap_ros.export.bag import SessionBag
from asap_ros.export.delta import DELTA_INPUT_DIM, DELTA_INPUT_TERMS
from asap_ros.export.exporter import export_bag
from asap_ros.export.npz_log import ASAP_LOGGER_KEYS
from asap_ros.export.pose_aa import driven_joint_axes, pose_aa
from asap_ros.export.progress import Progress
from asap_ros.testing.synthetic_bags import STATE_ARRIVAL_NS, SyntheticMotion, SyntheticPlan, write_synthetic_session
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

MOTION = "CR7_level1"


@pytest.fixture(scope="module")
def robot():
    return load_robot_model()


@pytest.fixture(scope="module")
def session(tmp_path_factory, robot, assets) -> Path:
    """Two episodes, the second e-stopped halfway; logged in 4 ms batches like the recorder."""
    plan = SyntheticPlan(episodes=2, episode_s=2.0, estop_last=True, motion=MOTION, log_batch_ms=4.0)
    return write_synthetic_session(tmp_path_factory.mktemp("bags") / "session", plan, robot.default_q)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, session) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("export")
    records = export_bag(session, out, ["asap", "npz", "delta"], progress=False)
    assert [r.episode for r in records] == [1, 2]
    return {Path(f).name.split(".", 1)[1] + str(r.episode): Path(f) for r in records for f in r.files}


def recorded_actions(bag: Path) -> dict[int, np.ndarray]:
    """Raw actions of the TRACKING steps per episode start, read with the independent mcap reader."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    steps = []
    for file in sorted(bag.glob("*.mcap")):
        with file.open("rb") as stream:
            reader = make_reader(stream, decoder_factories=[DecoderFactory()])
            for _, _, _, msg in reader.iter_decoded_messages(topics=["/asap/policy_step"]):
                if msg.mode == "TRACKING":
                    steps.append((msg.stamp_ns, msg.motion_tick, np.array(msg.raw_action, np.float32)))
    runs: list[list] = []
    for _stamp, tick, action in sorted(steps, key=lambda s: s[0]):
        if tick == 0:
            runs.append([])
        runs[-1].append(action)
    return {i + 1: np.array(run) for i, run in enumerate(runs)}


def test_action_equals_the_raw_actions_in_the_bag(exported, session):
    actions = recorded_actions(session)
    for episode in (1, 2):
        clip = load_pickle_restricted(exported[f"pkl{episode}"])
        (entry,) = clip.values()
        np.testing.assert_array_equal(entry["action"], actions[episode][:-1])  # the last has no successor state
    assert len(actions[2]) == 50  # e-stopped halfway, still exported


def test_clip_pickle_is_portable_and_a_valid_clip(exported):
    path = exported["pkl1"]
    globals_ = {arg for op, arg, _ in pickletools.genops(path.read_bytes()) if op.name == "GLOBAL"}
    assert globals_ == {"numpy.core.multiarray _reconstruct"}  # resolvable by numpy 1.x and 2.x
    clip = load_clip(path)
    assert clip.fps == 50 and clip.action.shape == (99, 23)
    joblib = pytest.importorskip("joblib", reason="joblib is the trainer's loader; not a runtime dependency")
    loaded = joblib.load(path)
    np.testing.assert_array_equal(loaded[path.stem]["dof"], pickle.loads(path.read_bytes())[path.stem]["dof"])


def test_resampled_values_match_the_synthetic_truth(session, robot):
    truth = SyntheticMotion(robot.default_q)
    with SessionBag(session) as bag:
        (marker, episode), _ = list(bag.iter_episodes())
    aligned = align_episode(episode)
    t = (aligned.time_ns - SyntheticPlan().start_ns) / 1e9  # tick time: the runtime's arrival stamp
    sampled = t - STATE_ARRIVAL_NS / 1e9  # when the robot sampled it
    np.testing.assert_allclose(aligned.q, truth.q(sampled), atol=1e-6)  # the very LowState the actor used
    np.testing.assert_allclose(aligned.root_pos, truth.root_pos(t), atol=1e-5)  # mocap interpolated
    np.testing.assert_allclose(np.abs(np.sum(aligned.root_quat_wxyz * truth.root_quat_wxyz(t), axis=1)), 1.0, atol=1e-9)
    np.testing.assert_allclose(aligned.root_ang_vel_body, truth.body_ang_vel(t), atol=1e-3)
    velocity = np.stack([np.full_like(t, 0.3), 0.1 * np.cos(t), 0.04 * np.cos(2 * t)], axis=1)
    np.testing.assert_allclose(aligned.root_lin_vel_world, velocity, atol=1e-4)
    # LowState and LowCmd: the step's own samples; mocap 200 Hz captured 1.3 ms off the LowState grid
    assert aligned.sync.max_ms == pytest.approx({"/lowstate": 0.0, "/lowcmd": 0.0, "/mocap/pose": 1.27})
    assert aligned.sync.largest == ("/mocap/pose", pytest.approx(1.27))


def test_pose_aa_reproduces_the_shipped_clips(assets):
    axes = driven_joint_axes()
    for path in sorted((assets / "motions").glob("*.pkl")):
        clip = load_clip(path)
        rebuilt = pose_aa(xyzw_to_wxyz(clip.root_quat_xyzw), clip.dof, axes)
        np.testing.assert_allclose(rebuilt, clip.pose_aa, atol=2e-6, err_msg=path.name)


def test_npz_has_the_asap_logger_keys_and_the_extras(exported, session, robot):
    log = np.load(exported["npz1"])
    assert set(ASAP_LOGGER_KEYS) <= set(log.files)
    assert {"phase", "observation", "raw_action", "tick", "lowstate_stamp_ns", "lowcmd_stamp_ns", "root_stamp_ns",
            "policy_stamp_ns"} <= set(log.files)  # fmt: skip
    rows = 100
    for key in ("joint_pos", "joint_vel", "tau_est", "joint_pos_cmd", "joint_vel_cmd", "kp", "kd", "tau_cmd"):
        assert log[key].shape == (rows, 29), key
    assert log["IMU_quaternion"].shape == log["quat"].shape == (rows, 4)
    assert log["observation"].shape == (rows, 380) and log["observation"].dtype == np.float32
    assert np.all(np.diff(log["time"]) > 0) and list(log["tick"]) == list(range(rows))
    np.testing.assert_array_equal(log["raw_action"], SyntheticMotion.raw_action(np.arange(rows)))
    np.testing.assert_array_equal(log["observation"], SyntheticMotion.obs(np.arange(rows)))
    assert list(log["joint_names"]) == list(robot.joint_names)
    assert str(log["root_source"]) == "mocap"


def test_delta_transitions_follow_the_documented_schema(exported, robot):
    d = np.load(exported["delta.npz1"])
    n = 99  # 100 ticks -> 99 one-step transitions
    assert d["delta_input"].shape == d["next_delta_input"].shape == (n, DELTA_INPUT_DIM) == (n, 108)
    np.testing.assert_array_equal(d["next_dof_pos"][:-1], d["dof_pos"][1:])
    np.testing.assert_array_equal(d["action"], SyntheticMotion.raw_action(np.arange(n)))
    assert list(d["delta_input_terms"]) == [t.name for t in DELTA_INPUT_TERMS]
    offsets = np.cumsum([0, *d["delta_input_dims"]])
    terms = {name: slice(offsets[i], offsets[i + 1]) for i, name in enumerate(d["delta_input_terms"])}
    unavailable = {name for name, s in terms.items() if not d["delta_input_available"][s].any()}
    assert unavailable == {"actions", "feet_contact_force"}
    np.testing.assert_allclose(d["delta_input"][:, terms["actions_open_loop"]], d["action"])
    np.testing.assert_allclose(d["delta_input"][:, terms["dof_vel"]], 0.05 * d["dof_vel"], rtol=1e-6)
    np.testing.assert_allclose(
        d["delta_input"][:, terms["dof_pos"]], d["dof_pos"] - robot.default_q[DRIVEN_MOTORS], atol=1e-6
    )
    np.testing.assert_allclose(d["delta_input"][:, terms["base_pos_z"]][:, 0], d["base_pos"][:, 2], rtol=1e-6)
    assert np.isnan(d["delta_input"][:, terms["feet_contact_force"]]).all()


def test_estop_episode_is_exported_and_flagged(exported, capsys, session, tmp_path):
    meta = json.loads(exported["pkl2"].with_name(exported["pkl2"].stem + ".meta.json").read_text())
    assert meta["cut_short"] and meta["estop"] and meta["outcome"].startswith("damping")
    assert meta["actor_steps"] == 50 and any("cut short" in n for n in meta["notes"])
    assert main(["export", str(session), "--out", str(tmp_path), "--episode", "2", "-j", "1"]) == 0
    out = capsys.readouterr().out
    assert "CUT SHORT (damping: e-stop: operator)" in out
    assert "targets clamped to the joint limits: 0 of 50 ticks" in out


@pytest.fixture(scope="module")
def no_mocap_session(tmp_path_factory, robot, assets) -> Path:
    plan = SyntheticPlan(episodes=1, episode_s=1.0, mocap=False)
    return write_synthetic_session(tmp_path_factory.mktemp("bags") / "no_mocap", plan, robot.default_q)


def test_without_mocap_asap_format_refuses_naming_the_topic(no_mocap_session, tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"/mocap/pose.*root position from motion capture"):
        export_bag(no_mocap_session, tmp_path, ["asap"], progress=False)
    assert main(["export", str(no_mocap_session), "--out", str(tmp_path), "-j", "1"]) == 2
    assert "/mocap/pose" in capsys.readouterr().out


def test_without_mocap_npz_uses_the_imu_and_says_so(no_mocap_session, tmp_path, capsys, robot):
    assert main(["export", str(no_mocap_session), "--out", str(tmp_path), "--format", "npz", "-j", "1"]) == 0
    out = capsys.readouterr().out
    assert "root from imu" in out and "no mocap on /mocap/pose" in out
    log = np.load(next(tmp_path.glob("*.npz")))
    assert str(log["root_source"]) == "imu" and np.isnan(log["pos"]).all() and np.isnan(log["lin_vel"]).all()
    np.testing.assert_allclose(log["quat"], log["IMU_quaternion"])
    np.testing.assert_allclose(log["ang_vel"], log["IMU_gyro"])


def test_unknown_clip_is_a_clear_error(tmp_path, robot, capsys, assets):
    bag = write_synthetic_session(tmp_path / "bag", SyntheticPlan(episodes=1, episode_s=1.0, motion="no_such_motion"),
                                  robot.default_q)  # fmt: skip
    with pytest.raises(ConfigError, match="unknown clip.*no_such_motion"):
        export_bag(bag, tmp_path / "out", ["npz"], progress=False)
    assert main(["export", str(bag), "--out", str(tmp_path / "out"), "--clip", str(tmp_path / "missing.pkl")]) == 2
    assert "missing.pkl: clip file not found" in capsys.readouterr().out


def test_bad_bag_and_episode_arguments(tmp_path, session):
    with pytest.raises(ConfigError, match="not a rosbag2 bag directory"):
        export_bag(tmp_path, tmp_path / "out", ["asap"], progress=False)
    with pytest.raises(ConfigError, match=r"no such episode \(episodes: 1, 2\)"):
        export_bag(session, tmp_path / "out", ["asap"], episodes=[7], progress=False)
    with pytest.raises(ConfigError, match="--format"):
        export_bag(session, tmp_path / "out", ["csv"], progress=False)


def test_progress_bar_line():
    bar = Progress(40, "export s", "episodes", enabled=False)
    bar.advance(10)
    assert bar.line(3.0) == "export s [########......................] 10/40 episodes, 3 s, ~9 s left"
