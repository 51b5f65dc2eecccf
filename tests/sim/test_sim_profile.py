"""Robot profiles and simulator settings: validation, and each deviation's effect (real MuJoCo)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError
from asap_ros.core.state import NUM_MOTORS, JointCommand
from asap_ros.g1.codec import LowCmdEncoder
from asap_ros.g1.crc import record_crc
from asap_ros.g1.layout import LOWSTATE_WIRE
from asap_ros.sim.bridge import LowCmdIntake, LowStateEncoder, RobotReading
from asap_ros.sim.config import load_sim_config
from asap_ros.sim.motors import CommandGate, MotorCommand, MotorModel
from asap_ros.sim.physics import G1Physics
from asap_ros.sim.profile import SensorNoise, load_profile

KNEES = [3, 9]


@pytest.fixture(scope="module")
def joints() -> tuple[str, ...]:
    return load_robot_model().joint_names


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return path


def test_shipped_profiles_load(joints):
    nominal = load_profile("nominal", joints)
    assert (nominal.torque_scale == 1.0).all() and nominal.actuation_delay_s == 0.0
    weak = load_profile("weak_knees", joints)
    expected = np.ones(NUM_MOTORS)
    expected[KNEES] = 0.6
    np.testing.assert_array_equal(weak.torque_scale, expected)
    worn = load_profile("worn", joints)
    assert worn.actuation_delay_s == 0.004 and worn.command_drop_probability == 0.01
    assert worn.mass_offset_kg == {"torso_link": 1.5}
    assert worn.thermal.time_constant_s[KNEES[0]] == 60.0 and worn.thermal.time_constant_s[0] == 120.0


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("torque_scale: {left_kneee_joint: 0.5}", "torque_scale", "left_kneee_joint"),
        ("joint_friction: {elbow: 0.5}", "joint_friction", "elbow"),
        ("temperature: {joints: {knee: {time_constant_s: 3}}}", "temperature.joints", "knee"),
        ("torque_scale: {left_knee_joint: -0.5}", "torque_scale.left_knee_joint", -0.5),
        ("actuation_delay_s: -0.01", "actuation_delay_s", -0.01),
        ("command_drop_probability: 1.5", "command_drop_probability", 1.5),
        ("sensor_noise: {q: 0.1, accel: 0.1}", "sensor_noise.accel", None),
        ("torque_scales: {}", "torque_scales", None),
        ("seed: fast", "seed", "fast"),
    ],
)
def test_bad_profile_names_file_key_and_value(tmp_path, joints, text, key, value):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_profile(path, joints)
    assert err.value.file == str(path) and err.value.key == key
    if value is not None:
        assert err.value.value == value and repr(value) in str(err.value)


def test_unknown_body_and_impossible_mass_are_config_errors(tmp_path, assets, joints):
    config = load_sim_config()
    for text, problem in (("mass_offset_kg: {torso: 1.0}", "unknown body"), ("mass_offset_kg: {pelvis: -10}", "mass")):
        profile = load_profile(write(tmp_path, text), joints)
        with pytest.raises(ConfigError, match=problem) as err:
            G1Physics(assets / config.model, joints, 0.002, np.zeros(NUM_MOTORS), profile, config.band)
        assert err.value.file == str(tmp_path / "profile.yaml")


def test_friction_damping_and_mass_reach_the_mujoco_model(tmp_path, assets, joints):
    config = load_sim_config()
    nominal, worn = (
        G1Physics(assets / config.model, joints, 0.002, np.zeros(NUM_MOTORS), load_profile(name, joints), config.band)
        for name in ("nominal", "worn")
    )
    knee_dof = worn.model.jnt_dofadr[worn.model.joint("left_knee_joint").id]
    assert worn.model.dof_frictionloss[knee_dof] == 0.6 and nominal.model.dof_frictionloss[knee_dof] == 0.2
    assert worn.model.dof_damping[knee_dof] == 0.2 and nominal.model.dof_damping[knee_dof] == 0.05
    assert worn.total_mass == pytest.approx(nominal.total_mass + 1.5)


def test_weak_knees_deliver_less_knee_torque_for_the_same_command(assets, joints):
    """Same MuJoCo robot, same command: the weak-kneed one's knees push 60% as hard."""
    robot, config = load_robot_model(), load_sim_config()
    target = np.array(robot.default_q)
    target[KNEES] = 1.2  # bend both knees: the PD saturates at first
    cmd = MotorCommand(np.ones(NUM_MOTORS, bool), target, np.zeros(NUM_MOTORS), np.zeros(NUM_MOTORS),
                       np.array(robot.kp), np.array(robot.kd))
    knee_torque = {}
    for name in ("nominal", "weak_knees"):
        profile = load_profile(name, joints)
        physics = G1Physics(assets / config.model, joints, 0.002, robot.default_q, profile, config.band)
        motors = MotorModel(physics.effort_limit, profile.torque_scale)
        history = []
        for _ in range(250):
            tau = motors.torque(cmd, physics.q(), physics.dq())
            physics.step(tau)
            history.append(tau[KNEES])
        knee_torque[name] = np.abs(history)
    peak_nominal, peak_weak = knee_torque["nominal"].max(), knee_torque["weak_knees"].max()
    print(f"\n  knee torque peak: nominal {peak_nominal:.1f} N m, weak_knees {peak_weak:.1f} N m")
    assert peak_nominal == pytest.approx(139.0)  # saturated at the effort limit
    assert peak_weak == pytest.approx(0.6 * 139.0)


def test_command_drops_follow_probability_and_seed(joints):
    payload = LowCmdEncoder().encode_cdr(JointCommand(), 5)

    def dropped(seed: int) -> list[int]:
        gate = CommandGate(0.0, 0.1)
        intake = LowCmdIntake(gate, 5, drop_probability=0.2, rng=np.random.default_rng(seed))
        marks = []
        for _ in range(2000):
            before = intake.counters.dropped_by_profile
            intake.on_payload(payload, 0, 0)
            marks.append(intake.counters.dropped_by_profile - before)
        assert intake.counters.accepted + intake.counters.dropped_by_profile == 2000
        return marks

    first = dropped(1)
    assert 0.16 < np.mean(first) < 0.24
    assert dropped(1) == first and dropped(2) != first


def test_sensor_noise_reaches_lowstate_only_as_configured():
    reading = RobotReading(
        q=np.linspace(-1, 1, NUM_MOTORS), dq=np.zeros(NUM_MOTORS), ddq=np.zeros(NUM_MOTORS),
        tau=np.zeros(NUM_MOTORS), temperature_c=np.full(NUM_MOTORS, 31.6), enabled=np.ones(NUM_MOTORS, bool),
        quat_wxyz=np.array([1.0, 0, 0, 0]), gyro=np.zeros(3), acc=np.array([0, 0, 9.81]), imu_temperature_c=25.0,
    )
    exact = LowStateEncoder(5, SensorNoise(), np.random.default_rng(0))
    record = LOWSTATE_WIRE.from_cdr(exact.encode(7, reading))
    np.testing.assert_array_equal(record["motor_state"]["q"][:NUM_MOTORS], reading.q.astype(np.float32))
    assert (record["motor_state"]["temperature"][:NUM_MOTORS] == 32).all()
    noisy = LowStateEncoder(5, SensorNoise(q=0.01, dq=0.0, gyro=0.1, quat=0.02), np.random.default_rng(0))
    errors_q, gyros, angles = [], [], []
    for tick in range(400):
        record = LOWSTATE_WIRE.from_cdr(noisy.encode(tick, reading))
        assert int(record["crc"]) == record_crc(record)
        errors_q.append(record["motor_state"]["q"][:NUM_MOTORS] - reading.q)
        gyros.append(record["imu_state"]["gyroscope"])
        angles.append(2 * np.arccos(np.clip(record["imu_state"]["quaternion"][0], -1, 1)))
        assert not record["motor_state"]["dq"][:NUM_MOTORS].any()
    assert np.std(errors_q) == pytest.approx(0.01, rel=0.1)
    assert np.std(gyros) == pytest.approx(0.1, rel=0.1)
    assert np.mean(angles) == pytest.approx(0.02 * np.sqrt(8 / np.pi), rel=0.1)  # Maxwell mean of 3 axes


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("physics_rate_hz: 100", "physics_rate_hz"),
        ("lowstate_rate_hz: 300", "lowstate_rate_hz"),
        ("lowstate_lead_ms: 2.0", "lowstate_lead_ms"),  # not under the 2 ms LowState period
        ("lowstate_lead_ms: -0.1", "lowstate_lead_ms"),
        ("lowstate_lead_ms: fast", "lowstate_lead_ms"),
        ("mode_machine: 300", "mode_machine"),
        ("band: {stifness: 10}", "band.stifness"),
        ("band: {point_m: [0, 0]}", "band.point_m"),
        ("mocap: {dropout: 2}", "mocap.dropout"),
        ("mocap: {topic: 'mocap/2pose'}", "mocap.topic"),
        ("mocap: {topic: 'mocap//pose'}", "mocap.topic"),
        ("mocap: {topic: 'mocap pose'}", "mocap.topic"),
    ],
)
def test_bad_sim_config_names_file_and_key(tmp_path, text, key):
    path = tmp_path / "sim.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_sim_config(path)
    assert err.value.file == str(path) and err.value.key == key


def test_band_that_cannot_carry_the_robot_is_a_config_error(assets, joints):
    config = load_sim_config()
    band = dataclasses.replace(config.band, stiffness=50.0)
    with pytest.raises(ConfigError, match="cannot carry") as err:
        G1Physics(assets / config.model, joints, 0.002, np.zeros(NUM_MOTORS), load_profile("nominal", joints), band,
                  config.source)
    assert err.value.key == "band.start_support"
