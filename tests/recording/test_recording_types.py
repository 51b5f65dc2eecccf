"""Recorded message definitions: the DDS bytes are the ROS 2 CDR of our .msg definitions.

Every field of unitree_hg LowState_/LowCmd_ and of our PolicyStep_/ModeTransition_ gets a
random value; the cyclonedds XCDR1 bytes are decoded by rosbags and by mcap-ros2-support (from
the schema text embedded in bags) and compared field by field, and rosbags re-serialises them
to the same bytes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from mcap.records import Schema
from mcap_ros2.decoder import DecoderFactory
from unitree_sdk2py.idl.unitree_hg.msg.dds_ import IMUState_, LowCmd_, LowState_, MotorCmd_, MotorState_

from asap_ros.g1.layout import LOWCMD_LAYOUT, LOWCMD_WIRE, LOWSTATE_LAYOUT, LOWSTATE_WIRE
from asap_ros.recording.dds_source import ros_cdr
from asap_ros.recording.typestore import recording_typestore, schema_of
from asap_ros.runtime.step_topics import ModeTransition_, PolicyStep_

IDL_TO_ROS = {
    LowState_: "unitree_hg/msg/LowState",
    LowCmd_: "unitree_hg/msg/LowCmd",
    MotorState_: "unitree_hg/msg/MotorState",
    MotorCmd_: "unitree_hg/msg/MotorCmd",
    IMUState_: "unitree_hg/msg/IMUState",
    PolicyStep_: "asap_ros/msg/PolicyStep",
    ModeTransition_: "asap_ros/msg/ModeTransition",
}


def random_wire(idl_type: type, layout: np.dtype, wire, rng: np.random.Generator) -> bytes:
    """XCDR1 bytes, as cyclonedds sends them, of an hg message whose every field is random bits."""
    record = np.frombuffer(rng.integers(0, 256, layout.itemsize, dtype=np.uint8).tobytes(), dtype=layout).reshape(())
    return idl_type.deserialize(wire.to_cdr(record)).serialize()  # zeroes the padding, as a writer does


def random_policy_step(rng: np.random.Generator) -> PolicyStep_:
    return PolicyStep_(
        stamp_ns=int(rng.integers(0, 2**62)), control_tick=int(rng.integers(0, 2**63)), mode="TRACKING",
        motion="kick_level1", episode=int(rng.integers(0, 2**32)), motion_tick=int(rng.integers(-1, 2**31)),
        phase=float(np.float32(rng.random())), lowstate_tick=int(rng.integers(0, 2**32)),
        lowstate_stamp_ns=int(rng.integers(0, 2**62)), mocap_stamp_ns=int(rng.integers(0, 2**62)),
        obs=rng.standard_normal(380).astype(np.float32).tolist(),
        raw_action=rng.standard_normal(23).astype(np.float32).tolist(),
        q_target=rng.standard_normal(29).astype(np.float32).tolist(),
        compute_ns=int(rng.integers(0, 2**40)), latency_ns=int(rng.integers(-(2**40), 2**40)), late=True,
        fault_latched=True,
    )


def assert_same_fields(idl_value, decoded, path: str) -> None:
    """Each IDL field equals the decoded field of the same name (recursively, NaN == NaN)."""
    if dataclasses.is_dataclass(idl_value):
        names = [f.name for f in dataclasses.fields(idl_value)]
        for name in names:
            assert_same_fields(getattr(idl_value, name), getattr(decoded, name), f"{path}.{name}")
        return
    if isinstance(idl_value, list) and idl_value and dataclasses.is_dataclass(idl_value[0]):
        assert len(idl_value) == len(decoded), path
        for i, (a, b) in enumerate(zip(idl_value, decoded)):
            assert_same_fields(a, b, f"{path}[{i}]")
        return
    if isinstance(idl_value, str):
        assert idl_value == decoded, path
        return
    idl_value, decoded = (  # cyclonedds and mcap-ros2 hand uint8 arrays out as bytes
        np.frombuffer(v, dtype=np.uint8) if isinstance(v, bytes) else v for v in (idl_value, decoded)
    )
    expected = np.asarray(decoded)
    np.testing.assert_array_equal(np.asarray(idl_value).astype(expected.dtype), expected, err_msg=path)


@pytest.mark.parametrize("idl_type", list(IDL_TO_ROS), ids=lambda t: t.__name__)
def test_field_names_and_order_match_the_idl(idl_type):
    store = recording_typestore()
    ros_fields = [name for name, _ in store.fielddefs[IDL_TO_ROS[idl_type]][1]]
    assert ros_fields == [f.name for f in dataclasses.fields(idl_type)]


def samples(rng: np.random.Generator) -> list[tuple[type, bytes]]:
    step = random_policy_step(rng)
    transition = ModeTransition_(stamp_ns=123456789, from_mode="TRACKING", to_mode="DAMPING",
                                 reason="operator e-stop (~/estop service)", motion="CR7_level1")
    return [
        (LowState_, random_wire(LowState_, LOWSTATE_LAYOUT, LOWSTATE_WIRE, rng)),
        (LowCmd_, random_wire(LowCmd_, LOWCMD_LAYOUT, LOWCMD_WIRE, rng)),
        (PolicyStep_, step.serialize()),
        (ModeTransition_, transition.serialize()),
    ]


@pytest.mark.parametrize("index", range(4), ids=["LowState", "LowCmd", "PolicyStep", "ModeTransition"])
def test_dds_bytes_decode_exactly_with_rosbags_and_mcap(index):
    rng = np.random.default_rng(index)
    for _ in range(5):
        idl_type, payload = samples(rng)[index]
        msgtype = IDL_TO_ROS[idl_type]
        assert payload[:4] == b"\x00\x01\x00\x00", "cyclonedds must send XCDR1 little-endian"
        idl_value = idl_type.deserialize(payload)
        store = recording_typestore()
        with_rosbags = store.deserialize_cdr(payload, msgtype)
        assert_same_fields(idl_value, with_rosbags, msgtype)
        assert bytes(store.serialize_cdr(with_rosbags, msgtype)) == payload
        text, _ = schema_of(msgtype)
        decode = DecoderFactory().decoder_for("cdr", Schema(id=1, name=msgtype, encoding="ros2msg", data=text.encode()))
        assert_same_fields(idl_value, decode(payload), msgtype)


def test_received_padding_is_accepted_by_both_readers():
    """Cyclone pads samples to 4 bytes on the wire: both readers must ignore the padding."""
    step = random_policy_step(np.random.default_rng(7))
    payload = step.serialize()
    padded = payload + bytes(-len(payload) % 4 or 4)
    store = recording_typestore()
    assert_same_fields(step, store.deserialize_cdr(padded, "asap_ros/msg/PolicyStep"), "rosbags")
    text, _ = schema_of("asap_ros/msg/PolicyStep")
    decode = DecoderFactory().decoder_for("cdr", Schema(id=1, name="asap_ros/msg/PolicyStep", encoding="ros2msg", data=text.encode()))
    assert_same_fields(step, decode(padded), "mcap")


def test_xcdr2_samples_are_re_encoded_as_xcdr1():
    step = random_policy_step(np.random.default_rng(3))
    xcdr2 = step.serialize(use_version_2=True)
    assert xcdr2[:2] != b"\x00\x01" and xcdr2 != step.serialize()
    assert ros_cdr(xcdr2, PolicyStep_) == step.serialize()
    xcdr1 = step.serialize()
    assert ros_cdr(xcdr1, PolicyStep_) is xcdr1
