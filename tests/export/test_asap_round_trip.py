"""The ``asap`` and ``delta`` exports pair actions with states as ASAP's own saved motions do.

Written from ASAP's convention alone (no ASAP code): ``motions_for_saving``
(``humanoidverse/envs/motion_tracking/motion_tracking.py``, ``_post_physics_step``) appends one
row after every physics step i: the state the step reached, the action of step i, the actor
observation of that state, ``reset_buf`` as ``terminate`` and the motion time
``episode_length_buf * dt + start``; every array float32 but ``terminate`` (int64), ``fps`` =
``1 / dt``. The delta-action trainer replays the state at ``t = step * dt + start`` and applies the
action of the lower frame at ``(step + 1) * dt + start``
(``humanoidverse/envs/delta_a/delta_a_open_loop.py``, ``get_open_loop_action_at_current_timestep``).

One synthetic session goes through the recorder's bag path (:mod:`asap_ros.testing.synthetic_bags`,
the recorder's ``BagWriter``); the trajectory it holds is read back with the independent readers
(``mcap`` + ``mcap-ros2-support``, and ``rosbags``), saved the way ASAP saves it, and compared
with what ``asap-ros export`` writes.
"""

from __future__ import annotations

import math
import pickle
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from asap_ros.cli import main
from asap_ros.config.robot import load_robot_model
from asap_ros.testing.synthetic_bags import STATE_ARRIVAL_NS, SyntheticMotion, SyntheticPlan, write_synthetic_session
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

MOTION = "CR7_level1"
DT = 0.02
STEPS = 100
ASAP_KEYS = {"root_trans_offset", "pose_aa", "dof", "root_rot", "actor_obs", "action", "terminate",
             "root_lin_vel", "root_ang_vel", "dof_vel", "motion_times", "fps"}  # fmt: skip


@pytest.fixture(scope="module")
def bag(tmp_path_factory, assets) -> Path:
    """One completed motion; mocap captured on the ticks (no resampling between two samples)."""
    plan = SyntheticPlan(episodes=1, episode_s=STEPS * DT, motion=MOTION, mocap_offset_ns=STATE_ARRIVAL_NS)
    return write_synthetic_session(tmp_path_factory.mktemp("bags") / "kick.session", plan,
                                   load_robot_model().default_q)  # fmt: skip


@pytest.fixture(scope="module")
def exported(bag, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("export")
    assert main(["export", str(bag), "--out", str(out), "--format", "asap", "--format", "delta", "-j", "1"]) == 0
    return {"asap": next(out.glob("*.pkl")), "delta": next(out.glob("*.delta.npz"))}


# --- the trajectory, as the independent readers see it in the bag ---------------------------------------------


def read_trajectory(bag: Path) -> dict[str, np.ndarray]:
    """Per actor step k: the state it saw (LowState of its ``lowstate_tick``, mocap captured at its
    tick time), its observation and its action, decoded by ``mcap-ros2-support`` from the schemas in the bag."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    steps, lowstates, mocap = [], {}, {}
    for file in sorted(bag.glob("*.mcap")):
        with file.open("rb") as stream:
            reader = make_reader(stream, decoder_factories=[DecoderFactory()])
            for _, channel, _, msg in reader.iter_decoded_messages():
                if channel.topic == "/asap/policy_step" and msg.motion_tick >= 0:
                    steps.append(msg)
                elif channel.topic == "/lowstate":
                    lowstates[msg.tick] = msg
                elif channel.topic == "/mocap/pose":
                    mocap[msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec] = msg.pose
    steps.sort(key=lambda m: m.motion_tick)
    assert [m.motion_tick for m in steps] == list(range(STEPS))
    state = [lowstates[m.lowstate_tick] for m in steps]
    pose = [mocap[m.lowstate_stamp_ns] for m in steps]
    return {
        "tick": np.array([m.motion_tick for m in steps]),
        "time_ns": np.array([m.lowstate_stamp_ns for m in steps]),
        "q": np.array([[s.motor_state[i].q for i in DRIVEN_MOTORS] for s in state], dtype=np.float32),
        "dq": np.array([[s.motor_state[i].dq for i in DRIVEN_MOTORS] for s in state], dtype=np.float32),
        "pos": np.array([[p.position.x, p.position.y, p.position.z] for p in pose]),
        "quat_xyzw": np.array([[p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w] for p in pose]),
        "obs": np.array([m.obs for m in steps], dtype=np.float32),
        "action": np.array([m.raw_action for m in steps], dtype=np.float32),
    }


def rotvec_of_xyzw(q: np.ndarray) -> np.ndarray:
    """Rotation vectors of unit quaternions (x, y, z, w)."""
    q = q * np.where(q[:, 3:] < 0, -1.0, 1.0)
    sin = np.linalg.norm(q[:, :3], axis=1, keepdims=True)
    angle = 2.0 * np.arctan2(sin, q[:, 3:])
    return np.where(sin > 0, q[:, :3] * angle / np.where(sin > 0, sin, 1.0), 0.0)


def joint_axes(model: Path) -> np.ndarray:
    """Hinge axes of the training model, in the order its joints appear (ASAP's ``dof_axis``)."""
    joints = [j for j in ET.parse(model).getroot().iter("joint") if j.get("type") != "free"]
    return np.array([[float(v) for v in j.get("axis").split()] for j in joints], dtype=np.float32)


def save_like_asap(trajectory: dict[str, np.ndarray], world_lin_vel: np.ndarray, world_ang_vel: np.ndarray,
                   axes: np.ndarray, start: float = 0.0) -> dict:  # fmt: skip
    """``motions_for_saving`` of the trajectory: after physics step i (action i applied), the state
    that step reached (the one step i + 1 saw) with action i; the episode ends after the last step."""
    reached = slice(1, None)  # physics step i reaches the state actor step i + 1 saw
    steps = len(trajectory["tick"]) - 1
    dof = trajectory["q"][reached]
    quat = trajectory["quat_xyzw"][reached].astype(np.float32)
    episode_length = np.arange(1, steps + 1)  # episode_length_buf after step i
    terminate = np.zeros(steps, dtype=np.int64)
    terminate[-1] = 1  # the motion ended (ASAP: reset_buf from the time-out)
    return {
        "root_trans_offset": trajectory["pos"][reached].astype(np.float32),
        "pose_aa": np.concatenate([rotvec_of_xyzw(quat.astype(np.float64)).astype(np.float32)[:, None],
                                   axes[None] * dof[:, :, None], np.zeros((steps, 3, 3), np.float32)], axis=1),
        "dof": dof,
        "root_rot": quat,
        "actor_obs": trajectory["obs"][reached],
        "action": trajectory["action"][:-1],
        "terminate": terminate,
        "root_lin_vel": world_lin_vel[reached].astype(np.float32),
        "root_ang_vel": world_ang_vel[reached].astype(np.float32),
        "dof_vel": trajectory["dq"][reached],
        "motion_times": episode_length.astype(np.float32) * np.float32(DT) + np.float32(start),
        "fps": 1 / DT,
    }  # fmt: skip


@pytest.fixture(scope="module")
def trajectory(bag) -> dict[str, np.ndarray]:
    return read_trajectory(bag)


@pytest.fixture(scope="module")
def asap_saved(trajectory, assets) -> dict:
    truth = SyntheticMotion(load_robot_model().default_q)
    t = (trajectory["time_ns"] - SyntheticPlan().start_ns) / 1e9
    lin_vel = np.stack([np.full_like(t, 0.3), 0.1 * np.cos(t), 0.04 * np.cos(2 * t)], axis=1)
    yaw = 0.2 * t
    roll_rate = 0.05 * np.cos(t)
    ang_vel = np.stack([roll_rate * np.cos(yaw), roll_rate * np.sin(yaw), np.full_like(t, 0.2)], axis=1)
    assert truth.root_pos(t) == pytest.approx(trajectory["pos"], abs=1e-12)  # the velocities belong to this motion
    return save_like_asap(trajectory, lin_vel, ang_vel, joint_axes(assets / "robots/g1/g1_29dof_anneal_23dof.xml"))


def load_entry(path: Path) -> tuple[str, dict]:
    (key, entry), = pickle.loads(path.read_bytes()).items()
    return key, entry


# --- the checks --------------------------------------------------------------------------------------------------


def test_export_has_asaps_keys_shapes_and_dtypes(exported, asap_saved):
    key, entry = load_entry(exported["asap"])
    assert set(entry) == ASAP_KEYS | {"action_executed", "gyro"}
    for name, value in asap_saved.items():
        if name == "fps":
            assert type(entry[name]) is float and entry[name] == value
            continue
        assert (entry[name].shape, entry[name].dtype) == (value.shape, value.dtype), name
    assert entry["dof"].shape[0] == STEPS - 1


def test_export_equals_asaps_saved_rows(exported, asap_saved):
    _, entry = load_entry(exported["asap"])
    for name in ("dof", "dof_vel", "actor_obs", "action", "terminate", "motion_times"):
        np.testing.assert_array_equal(entry[name], asap_saved[name], err_msg=name)  # recorded values, bit for bit
    for name in ("root_trans_offset", "root_rot", "pose_aa"):  # mocap pose, normalised and cast to float32
        np.testing.assert_allclose(entry[name], asap_saved[name], rtol=0, atol=2e-7, err_msg=name)
    for name in ("root_lin_vel", "root_ang_vel"):  # estimated from mocap positions / orientations
        np.testing.assert_allclose(entry[name], asap_saved[name], rtol=0, atol=1e-3, err_msg=name)


def lower_frame(t: float, fps: float) -> int:
    """The trainer's lower frame at motion time ``t`` (times on the frame grid, exact)."""
    return math.floor(t * fps + 1e-6)


def replayed_pairs(entry: dict, start_frame: int = 0) -> list[tuple[int, int]]:
    """(state row, action row) the delta-action trainer uses at each step from ``start_frame``."""
    fps, frames = entry["fps"], len(entry["dof"])
    start = start_frame / fps
    pairs = []
    for step in range(frames):
        action_frame = lower_frame((step + 1) / fps + start, fps)
        if action_frame >= frames:
            break
        pairs.append((lower_frame(step / fps + start, fps), action_frame))
    return pairs


@pytest.mark.parametrize("start_frame", [0, 7])
def test_trainer_applies_to_each_state_the_action_computed_from_it(exported, trajectory, start_frame):
    _, entry = load_entry(exported["asap"])
    pairs = replayed_pairs(entry, start_frame)
    assert len(pairs) == STEPS - 2 - start_frame
    for state_row, action_row in pairs:
        seen = trajectory["q"].tolist().index(entry["dof"][state_row].tolist())  # the actor step that saw it
        np.testing.assert_array_equal(entry["action"][action_row], trajectory["action"][seen])
        np.testing.assert_array_equal(entry["actor_obs"][state_row], trajectory["obs"][seen])


def test_the_old_pairing_fails_the_same_check(trajectory):
    """Rows (state seen, action computed from it), as the export wrote before: the trainer would
    apply every action one tick early, and this check says so."""
    old = {"dof": trajectory["q"], "action": trajectory["action"], "fps": 1 / DT}
    wrong = [(s, a) for s, a in replayed_pairs(old) if not np.array_equal(old["action"][a], trajectory["action"][s])]
    assert len(wrong) == len(replayed_pairs(old))


def test_delta_rows_are_state_action_next_state(exported, trajectory):
    d = np.load(exported["delta"])
    n = STEPS - 1
    np.testing.assert_array_equal(d["tick"], np.arange(n))
    np.testing.assert_array_equal(d["dof_pos"].astype(np.float32), trajectory["q"][:-1])
    np.testing.assert_array_equal(d["action"], trajectory["action"][:-1])  # computed from dof_pos of its row
    np.testing.assert_array_equal(d["next_dof_pos"].astype(np.float32), trajectory["q"][1:])  # reached by it
    np.testing.assert_array_equal(d["terminate"], np.r_[np.zeros(n - 1, np.int64), 1])


def test_delta_and_asap_rows_are_the_same_transitions(exported):
    _, entry = load_entry(exported["asap"])
    d = np.load(exported["delta"])
    np.testing.assert_array_equal(entry["action"], d["action"])
    np.testing.assert_array_equal(entry["dof"], d["next_dof_pos"].astype(np.float32))


def test_rosbags_reads_the_same_actions(bag, trajectory):
    from rosbags.highlevel import AnyReader

    with AnyReader([bag]) as reader:
        connections = [c for c in reader.connections if c.topic == "/asap/policy_step"]
        steps = [reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages(connections=connections)]
    actions = np.array([s.raw_action for s in sorted(steps, key=lambda s: s.motion_tick) if s.motion_tick >= 0])
    np.testing.assert_array_equal(actions, trajectory["action"])


def test_clip_key_is_the_file_name_up_to_its_first_dot(exported):
    key, _ = load_entry(exported["asap"])
    path = exported["asap"]
    assert "." not in key and path.name.split(".")[0] == key == "kick_session_ep001_CR7_level1"
