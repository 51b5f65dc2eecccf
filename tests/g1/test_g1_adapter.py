"""G1 hg adapter against unitree_sdk2py's own types, CRC and Cyclone DDS serialiser."""

from __future__ import annotations

import time

import numpy as np
import pytest
from unitree_sdk2py.idl.default import unitree_hg_msg_dds__LowCmd_, unitree_hg_msg_dds__LowState_
from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_
from unitree_sdk2py.utils.crc import CRC

from asap_ros.core.state import NUM_MOTORS, JointCommand
from asap_ros.g1.codec import damping_command, decode_lowstate_cdr
from asap_ros.g1.crc import hg_crc32, record_crc
from asap_ros.g1.layout import LOWCMD_WIRE, LOWSTATE_WIRE, MOTOR_ENABLED, MOTOR_OFF
from asap_ros.g1.sdk import SdkLowCmdEncoder, decode_lowstate, lowcmd_crc_ok, lowstate_crc_ok, lowstate_record

SDK_CRC = CRC()


def f32(x: float) -> float:
    return float(np.float32(x))


def random_lowstate(rng: np.random.Generator) -> LowState_:
    """A LowState_ with every field random (float32-exact), CRC set by the SDK."""
    msg = unitree_hg_msg_dds__LowState_()
    msg.version = [int(v) for v in rng.integers(0, 2**32, 2)]
    msg.mode_pr, msg.mode_machine, msg.tick = 0, int(rng.integers(0, 256)), int(rng.integers(0, 2**32))
    imu = msg.imu_state
    imu.quaternion = [f32(v) for v in rng.normal(size=4)]
    imu.gyroscope = [f32(v) for v in rng.normal(size=3)]
    imu.accelerometer = [f32(v) for v in rng.normal(size=3)]
    imu.rpy = [f32(v) for v in rng.normal(size=3)]
    imu.temperature = int(rng.integers(-100, 100))
    for motor in msg.motor_state:
        motor.mode = int(rng.integers(0, 256))
        motor.q, motor.dq, motor.ddq, motor.tau_est, motor.vol = (f32(v) for v in rng.normal(size=5))
        motor.temperature = [int(v) for v in rng.integers(-50, 150, 2)]
        motor.sensor = [int(v) for v in rng.integers(0, 2**32, 2)]
        motor.motorstate = int(rng.integers(0, 2**32))
        motor.reserve = [int(v) for v in rng.integers(0, 2**32, 4)]
    msg.wireless_remote = [int(v) for v in rng.integers(0, 256, 40)]
    msg.reserve = [int(v) for v in rng.integers(0, 2**32, 4)]
    msg.crc = SDK_CRC.Crc(msg)
    return msg


def random_command(rng: np.random.Generator) -> JointCommand:
    return JointCommand(
        q=rng.normal(size=NUM_MOTORS),
        dq=rng.normal(size=NUM_MOTORS),
        tau=rng.normal(size=NUM_MOTORS),
        kp=rng.uniform(0, 200, NUM_MOTORS),
        kd=rng.uniform(0, 5, NUM_MOTORS),
        enabled=rng.random(NUM_MOTORS) > 0.2,
    )


def test_crc_matches_sdk_native_and_python_implementations():
    rng = np.random.default_rng(1)
    for n_words in (2, 17, 251, 523):
        data = rng.integers(0, 2**32, n_words, dtype=np.uint32)
        words = data[:-1].tolist()  # the SDK's CRC covers all words but the crc word itself
        expected = SDK_CRC._crc_ctypes(words)
        assert expected == SDK_CRC._crc_py(words)
        assert hg_crc32(data.view(np.uint8)) == expected
        assert hg_crc32(data.tobytes()) == expected


def test_encoder_fills_sdk_lowcmd_with_sdk_valid_crc():
    rng = np.random.default_rng(2)
    encoder = SdkLowCmdEncoder()
    for mode_machine in (5, 6):
        cmd = random_command(rng)
        msg = encoder.encode(cmd, mode_machine)
        assert isinstance(msg, LowCmd_)
        assert msg.crc == SDK_CRC.Crc(msg)
        assert lowcmd_crc_ok(msg)
        assert (msg.mode_pr, msg.mode_machine) == (0, mode_machine)
        for i, motor in enumerate(msg.motor_cmd[:NUM_MOTORS]):
            assert motor.mode == (MOTOR_ENABLED if cmd.enabled[i] else MOTOR_OFF)
            assert (motor.q, motor.kp, motor.kd) == (f32(cmd.q[i]), f32(cmd.kp[i]), f32(cmd.kd[i]))
            assert (motor.dq, motor.tau) == (f32(cmd.dq[i]), f32(cmd.tau[i]))
        for motor in msg.motor_cmd[NUM_MOTORS:]:
            assert (motor.mode, motor.q, motor.kp, motor.kd, motor.tau) == (0, 0.0, 0.0, 0.0, 0.0)
    assert encoder.encode(cmd, 5) is encoder.msg  # preallocated: one message object


def test_encoder_refuses_non_finite_values_and_bad_mode_machine():
    encoder = SdkLowCmdEncoder()
    cmd = JointCommand()
    cmd.q[3] = np.nan
    with pytest.raises(ValueError, match=r"JointCommand.q\[3\] is not a finite float32"):
        encoder.encode(cmd, 5)
    cmd = JointCommand()
    cmd.kp[0] = 1e39  # finite in float64, infinite as float32
    with pytest.raises(ValueError, match=r"kp\[0\]"):
        encoder.encode(cmd, 5)
    with pytest.raises(ValueError, match="mode_machine"):
        encoder.encode(JointCommand(), 256)


def test_tampered_lowcmd_fails_crc_check():
    msg = SdkLowCmdEncoder().encode(JointCommand(), 5)
    msg.motor_cmd[3].q = 0.5
    assert not lowcmd_crc_ok(msg)


def test_decode_lowstate_reads_every_field_and_checks_crc():
    rng = np.random.default_rng(3)
    msg = random_lowstate(rng)
    state = decode_lowstate(msg, stamp_ns=123)
    assert state.crc_ok and lowstate_crc_ok(msg)
    assert (state.stamp_ns, state.tick, state.mode_machine) == (123, msg.tick, msg.mode_machine)
    motors = msg.motor_state[:NUM_MOTORS]
    np.testing.assert_array_equal(state.q, [m.q for m in motors])
    np.testing.assert_array_equal(state.dq, [m.dq for m in motors])
    np.testing.assert_array_equal(state.tau_est, [m.tau_est for m in motors])
    np.testing.assert_array_equal(state.temperature, [max(m.temperature) for m in motors])
    np.testing.assert_array_equal(state.quat_wxyz, msg.imu_state.quaternion)
    np.testing.assert_array_equal(state.gyro, msg.imu_state.gyroscope)
    np.testing.assert_array_equal(state.acc, msg.imu_state.accelerometer)
    assert state.wireless_remote == bytes(msg.wireless_remote)
    msg.motor_state[28].q += 1.0
    assert not decode_lowstate(msg, 0).crc_ok
    assert not lowstate_crc_ok(msg)


def test_wire_layouts_match_cyclone_serialiser_both_ways():
    rng = np.random.default_rng(4)
    state_msg = random_lowstate(rng)
    cdr = state_msg.serialize()
    record = lowstate_record(state_msg)
    assert LOWSTATE_WIRE.to_cdr(record) == cdr
    assert LOWSTATE_WIRE.from_cdr(cdr).tobytes() == record.tobytes()
    decoded = LowState_.deserialize(LOWSTATE_WIRE.to_cdr(record))
    assert lowstate_record(decoded).tobytes() == record.tobytes()

    cmd_msg = SdkLowCmdEncoder().encode(random_command(rng), 6)
    cdr = cmd_msg.serialize()
    record = LOWCMD_WIRE.from_cdr(cdr)
    assert LOWCMD_WIRE.to_cdr(record) == cdr
    assert int(record["crc"]) == record_crc(record) == cmd_msg.crc


def test_decode_lowstate_cdr_equals_decoding_the_sdk_object():
    msg = random_lowstate(np.random.default_rng(6))
    from_cdr = decode_lowstate_cdr(msg.serialize(), 42)
    from_sdk = decode_lowstate(msg, 42)
    assert from_cdr.crc_ok and from_cdr.tick == from_sdk.tick and from_cdr.stamp_ns == 42
    for name in ("q", "dq", "tau_est", "temperature", "quat_wxyz", "gyro", "acc"):
        np.testing.assert_array_equal(getattr(from_cdr, name), getattr(from_sdk, name))


def test_wire_layout_rejects_wrong_size_and_encoding():
    cdr = unitree_hg_msg_dds__LowCmd_().serialize()
    with pytest.raises(ValueError, match="bytes, expected 1004"):
        LOWCMD_WIRE.from_cdr(cdr[:-4])
    with pytest.raises(ValueError, match="encapsulation"):
        LOWCMD_WIRE.from_cdr(b"\x00\x00\x00\x00" + cdr[4:])  # big-endian CDR


def test_damping_command():
    kd = np.linspace(0.1, 2.9, NUM_MOTORS)
    cmd = damping_command(kd)
    np.testing.assert_array_equal(cmd.kd, kd)
    for name in ("kp", "dq", "tau"):
        assert not getattr(cmd, name).any()
    assert cmd.enabled.all()
    with pytest.raises(ValueError, match="shape"):
        damping_command(np.ones(23))


def test_benchmark_encode_and_decode(capsys):
    """Prints encode (+CRC) and decode (+CRC) cost (the control step budget is p99 < 150 us; a
    figure, not a timed assertion), and checks that every timed call did its whole job: the
    encoded LowCmd carries the SDK's CRC, both decoders return the same valid state."""
    rng = np.random.default_rng(5)
    encoder, cmd, msg = SdkLowCmdEncoder(), random_command(rng), random_lowstate(rng)
    cdr = msg.serialize()
    calls = {
        "encode LowCmd": lambda: encoder.encode(cmd, 5),
        "decode LowState": lambda: decode_lowstate(msg, 0),
        "decode raw LowState": lambda: decode_lowstate_cdr(cdr, 0),
        "SDK CRC(LowCmd)": lambda: SDK_CRC.Crc(encoder.msg),
    }
    figures, results = {}, {}
    for name, call in calls.items():
        samples = []
        for _ in range(2000):
            start = time.perf_counter_ns()
            results[name] = call()
            samples.append(time.perf_counter_ns() - start)
        assert len(samples) == 2000 and min(samples) > 0
        figures[name] = np.percentile(samples, [50, 99]) / 1e3
    with capsys.disabled():
        for name, (p50, p99) in figures.items():
            print(f"\n  {name}: p50 {p50:.1f} us, p99 {p99:.1f} us", end="")
        print()
    encoded = results["encode LowCmd"]
    assert encoded.crc == results["SDK CRC(LowCmd)"] and lowcmd_crc_ok(encoded)
    np.testing.assert_array_equal([m.kp for m in encoded.motor_cmd[:NUM_MOTORS]], cmd.kp.astype(np.float32))
    sdk_state, raw_state = results["decode LowState"], results["decode raw LowState"]
    assert sdk_state.crc_ok and raw_state.crc_ok
    for field in ("q", "dq", "tau_est", "temperature", "quat_wxyz", "gyro", "acc"):
        np.testing.assert_array_equal(getattr(sdk_state, field), getattr(raw_state, field), err_msg=field)
    assert (sdk_state.tick, sdk_state.mode_machine) == (raw_state.tick, raw_state.mode_machine) == (msg.tick, msg.mode_machine)
