"""``asap-ros export`` of a real recorded kick session (``asap-ros sim --record``: MuJoCo G1 over
DDS, ASAP's kick actor, asap_recorder), checked against the bag with the independent ``mcap``
reader: every actor step names its motion, the rows pair as ASAP saves them, the clamps are printed.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from asap_ros.cli import main
from asap_ros.testing.sim_sessions import record_sim_session
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

POLICY = "policies/kick_level1.yaml"


@pytest.fixture(scope="module")
def session(tmp_path_factory, assets):
    return record_sim_session(tmp_path_factory.getbasetemp() / "sim_nominal", profile="nominal", policy=POLICY)


def actor_steps(bag):
    """The actor's policy steps in order, and the driven joint angles of the LowState each one saw."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    steps, q = [], {}
    for file in sorted(bag.glob("*.mcap")):
        with file.open("rb") as stream:
            reader = make_reader(stream, decoder_factories=[DecoderFactory()])
            for _, channel, _, msg in reader.iter_decoded_messages(topics=["/asap/policy_step", "/lowstate"]):
                if channel.topic == "/lowstate":
                    q[msg.tick] = [msg.motor_state[i].q for i in DRIVEN_MOTORS]
                elif msg.motion_tick >= 0:
                    steps.append(msg)
    steps.sort(key=lambda m: m.stamp_ns)
    return steps, np.array([q[m.lowstate_tick] for m in steps], dtype=np.float32)


def test_every_actor_step_names_its_motion(session):
    steps, _ = actor_steps(session.bag)
    assert {m.motion for m in steps} == {"kick_level1"}
    if session.summary["tracking"]["completed"]:
        assert steps[-1].mode == "HOLD"  # the last step, recorded after the switch


def test_every_actor_step_carries_the_newest_mocap_stamp(session):
    """The recorded simulated mocap's stamp in each step (read on DDS by the control thread)."""
    steps, _ = actor_steps(session.bag)
    ages_ms = np.array([(m.stamp_ns - m.mocap_stamp_ns) / 1e6 for m in steps])
    assert all(m.mocap_stamp_ns > 0 for m in steps)
    assert ((ages_ms > 0.0) & (ages_ms < 500.0)).all(), ages_ms.max()  # the simulated Vicon's 5 ms latency, at least
    assert len({m.mocap_stamp_ns for m in steps}) >= len(steps) // 2  # 200 Hz poses: a new one every step


def test_rows_pair_as_asap_saves_them(session, tmp_path, capsys):
    assert main(["export", str(session.bag), "--out", str(tmp_path), "-j", "1"]) == 0
    out = capsys.readouterr().out
    steps, q = actor_steps(session.bag)
    assert "targets clamped to the joint limits: " in out and f" of {len(steps)} ticks" in out
    (entry,) = pickle.loads(next(tmp_path.glob("*.pkl")).read_bytes()).values()
    np.testing.assert_array_equal(entry["action"], np.array([m.raw_action for m in steps[:-1]], np.float32))
    np.testing.assert_array_equal(entry["actor_obs"], np.array([m.obs for m in steps[1:]], np.float32))
    np.testing.assert_array_equal(entry["dof"], q[1:])
    assert entry["terminate"].tolist() == [0] * (len(steps) - 2) + [1]
