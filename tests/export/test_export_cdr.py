"""Column-wise CDR decoding against rosbags' own per-message deserialiser."""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.export.cdr_columns import decode_columns, encode_columns, fields_of
from asap_ros.g1.layout import LOWSTATE_LAYOUT, LOWSTATE_WIRE, NUM_SLOTS
from asap_ros.recording.typestore import recording_typestore


@pytest.fixture(scope="module")
def store():
    return recording_typestore()


def lowstates(count: int, rng: np.random.Generator) -> list[bytes]:
    records = np.zeros(count, dtype=LOWSTATE_LAYOUT)
    records["tick"] = np.arange(count) * 2
    records["mode_machine"] = 5
    records["motor_state"]["q"] = rng.normal(size=(count, NUM_SLOTS))
    records["motor_state"]["tau_est"] = rng.normal(size=(count, NUM_SLOTS))
    records["motor_state"]["temperature"] = rng.integers(20, 90, size=(count, NUM_SLOTS, 2))
    records["imu_state"]["quaternion"] = rng.normal(size=(count, 4))
    return [LOWSTATE_WIRE.to_cdr(r) for r in records]


def test_lowstate_columns_equal_rosbags_deserialisation(store):
    raws = lowstates(50, np.random.default_rng(0))
    cols = decode_columns(store, "unitree_hg/msg/LowState", raws,
                          ["tick", "mode_machine", "motor_state.q", "motor_state.tau_est", "motor_state.temperature",
                           "imu_state.quaternion"])  # fmt: skip
    for i, raw in enumerate(raws):
        msg = store.deserialize_cdr(raw, "unitree_hg/msg/LowState")
        assert cols["tick"][i] == msg.tick and cols["mode_machine"][i] == msg.mode_machine
        np.testing.assert_array_equal(cols["motor_state.q"][i], [m.q for m in msg.motor_state])
        np.testing.assert_array_equal(cols["motor_state.tau_est"][i], [m.tau_est for m in msg.motor_state])
        np.testing.assert_array_equal(cols["motor_state.temperature"][i], [m.temperature for m in msg.motor_state])
        np.testing.assert_array_equal(cols["imu_state.quaternion"][i], msg.imu_state.quaternion)
    assert cols["motor_state.temperature"].shape == (50, NUM_SLOTS, 2)


def policy_step(store, mode: str, obs_dim: int, tick: int):
    cls = store.types["asap_ros/msg/PolicyStep"]
    return cls(
        stamp_ns=1_000 + tick, control_tick=tick, mode=mode, motion="CR7_level1" if obs_dim else "", episode=1,
        motion_tick=tick if obs_dim else -1, phase=0.01 * tick, lowstate_tick=2 * tick, lowstate_stamp_ns=tick,
        mocap_stamp_ns=0, obs=np.arange(obs_dim, dtype=np.float32) + tick,
        raw_action=np.full(23 if obs_dim else 0, tick, np.float32), q_target=np.full(29, 0.5, np.float32),
        compute_ns=3, latency_ns=4, late=bool(tick % 2), fault_latched=bool(tick % 3 == 0),
    )  # fmt: skip


def test_messages_of_different_layouts_decode_in_order(store):
    """Strings of other lengths and empty sequences give other layouts; the output keeps message order."""
    kinds = [("HOLD", 0), ("TRACKING", 380), ("TRACKING", 380), ("PREPARE", 0), ("TRACKING", 380)]
    msgs = [policy_step(store, mode, dim, i) for i, (mode, dim) in enumerate(kinds)]
    raws = [bytes(store.serialize_cdr(m, "asap_ros/msg/PolicyStep")) for m in msgs]
    fields = ["mode", "motion_tick", "phase", "late", "q_target", "fault_latched"]
    cols = decode_columns(store, "asap_ros/msg/PolicyStep", raws, fields)
    assert list(cols["mode"]) == [m.mode for m in msgs]
    assert list(cols["motion_tick"]) == [m.motion_tick for m in msgs]
    np.testing.assert_array_equal(cols["phase"], np.array([m.phase for m in msgs], dtype=np.float32))
    assert list(cols["late"]) == [m.late for m in msgs]
    assert list(cols["fault_latched"]) == [m.fault_latched for m in msgs]
    tracking = [raws[i] for i in (1, 2, 4)]
    obs = decode_columns(store, "asap_ros/msg/PolicyStep", tracking, ["obs"])["obs"]
    np.testing.assert_array_equal(obs, [msgs[i].obs for i in (1, 2, 4)])
    with pytest.raises(ValueError, match="shape varies"):
        decode_columns(store, "asap_ros/msg/PolicyStep", raws, ["obs"])
    with pytest.raises(KeyError, match="no field 'observation'"):
        decode_columns(store, "asap_ros/msg/PolicyStep", raws, ["observation"])


def test_encode_is_the_inverse_of_decode(store):
    proto = bytes(store.serialize_cdr(policy_step(store, "TRACKING", 380, 0), "asap_ros/msg/PolicyStep"))
    assert fields_of(store, "asap_ros/msg/PolicyStep", proto)["obs"] == (380,)
    columns = {"motion_tick": np.arange(7), "obs": np.random.default_rng(1).normal(size=(7, 380)).astype(np.float32)}
    raws = encode_columns(store, "asap_ros/msg/PolicyStep", proto, columns)
    for raw, tick, obs in zip(raws, columns["motion_tick"], columns["obs"]):
        msg = store.deserialize_cdr(raw, "asap_ros/msg/PolicyStep")
        assert msg.motion_tick == tick and msg.mode == "TRACKING"
        np.testing.assert_array_equal(msg.obs, obs)
