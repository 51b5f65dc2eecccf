"""Simulated G1 body and motors (real MuJoCo, no DDS): start pose, IMU, band, PD law, gate, heat."""

from __future__ import annotations

import dataclasses
import time

import mujoco
import numpy as np
import pytest

from asap_ros.config.robot import load_robot_model
from asap_ros.sim.config import BandConfig, load_sim_config
from asap_ros.sim.motors import CommandGate, MotorCommand, MotorModel, ThermalModel
from asap_ros.sim.physics import GRAVITY, G1Physics
from asap_ros.sim.profile import load_profile

KNEES = [3, 9]
LEFT_ELBOW = 18


@pytest.fixture(scope="module")
def robot():
    return load_robot_model()


def make_physics(assets, robot, band: BandConfig | None = None, profile: str = "nominal") -> G1Physics:
    config = load_sim_config()
    return G1Physics(
        assets / config.model, robot.joint_names, 1.0 / config.physics_rate_hz, robot.default_q,
        load_profile(profile, robot.joint_names), band or config.band,
    )


def hold_command(robot, q_target=None) -> MotorCommand:
    n = robot.num_joints
    return MotorCommand(
        enabled=np.ones(n, dtype=bool), q=np.array(robot.default_q if q_target is None else q_target),
        dq=np.zeros(n), tau=np.zeros(n), kp=np.array(robot.kp), kd=np.array(robot.kd),
    )


def run(physics: G1Physics, motors: MotorModel, cmd: MotorCommand | None, seconds: float) -> np.ndarray:
    tau = np.zeros(physics.effort_limit.shape)
    for _ in range(round(seconds / physics.timestep)):
        tau = motors.torque(cmd, physics.q(), physics.dq())
        physics.step(tau)
    return tau


def test_start_pose_is_default_pose_with_feet_on_the_floor(assets, robot):
    physics = make_physics(assets, robot)
    m, d = physics.model, physics.data
    np.testing.assert_allclose(physics.q(), robot.default_q)
    np.testing.assert_allclose(physics.pelvis_quat_wxyz(), [1, 0, 0, 0])
    floor = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    clearances = {
        g: mujoco.mj_geomDistance(m, d, g, floor, 10.0, np.zeros(6))
        for g in range(m.ngeom)
        if m.geom_bodyid[g] != 0 and (m.geom_contype[g] or m.geom_conaffinity[g])
    }
    assert min(clearances.values()) == pytest.approx(0.0, abs=1e-6)
    touching = {m.body(m.geom_bodyid[g]).name for g, c in clearances.items() if c < 1e-4}
    assert touching == {"left_ankle_roll_link", "right_ankle_roll_link"}  # both feet, nothing else
    assert physics.joint_names == robot.joint_names
    np.testing.assert_array_equal(physics.effort_limit, robot.tau_limit)


def test_band_carries_the_configured_weight_fraction_and_can_be_lowered_and_released(assets, robot):
    physics = make_physics(assets, robot)
    band, pos, vel = physics.band, physics.band_point(), np.zeros(3)
    weight = physics.total_mass * GRAVITY
    assert band.enabled and band.stiffness == 200.0 and band.damping == 100.0
    assert band.force(pos, vel)[2] == pytest.approx(weight)  # start_support 1.0
    band.lower(0.1)
    assert band.force(pos, vel)[2] == pytest.approx(weight - 200.0 * 0.1)
    assert band.force(pos, np.array([0, 0, -0.1]))[2] == pytest.approx(weight - 20.0 + 10.0)  # damping
    band.enabled = False
    assert not band.force(pos, vel).any()


def test_attaching_the_band_hooks_it_above_the_robot_where_it_is_now(assets, robot):
    physics = make_physics(assets, robot)
    physics.band.enabled = False
    physics.data.qpos[0] += 1.5  # the robot walked 1.5 m away from its start (free joint x)
    mujoco.mj_forward(physics.model, physics.data)
    physics.attach_band()
    point = physics.band_point()
    assert physics.band.enabled
    np.testing.assert_allclose(physics.band.anchor[:2], point[:2])
    force = physics.band.force(point, np.zeros(3))
    assert np.abs(force[:2]).max() < 1e-9 and force[2] > 0  # straight up: no drag back to the start
    run(physics, MotorModel(physics.effort_limit, np.ones(robot.num_joints)), hold_command(robot), 1.0)
    assert physics.pelvis_pos()[0] == pytest.approx(1.5, abs=0.05)


def tilt_deg(quat_wxyz: np.ndarray) -> float:
    """Angle between the pelvis z axis and the world vertical."""
    _, x, y, _ = quat_wxyz
    return float(np.degrees(np.arccos(np.clip(1 - 2 * (x * x + y * y), -1, 1))))


def test_limp_robot_hangs_upright_in_the_band_and_falls_when_released(assets, robot):
    physics = make_physics(assets, robot)
    motors = MotorModel(physics.effort_limit, np.ones(robot.num_joints))
    start_height = physics.pelvis_pos()[2]
    run(physics, motors, None, 2.0)  # no command yet: limp
    assert tilt_deg(physics.pelvis_quat_wxyz()) < 15.0
    assert physics.pelvis_pos()[2] > start_height - 0.1
    run(physics, motors, hold_command(robot), 1.0)
    assert physics.pelvis_pos()[2] == pytest.approx(start_height, abs=0.03)
    physics.band.enabled = False
    run(physics, motors, None, 1.5)
    assert physics.pelvis_pos()[2] < start_height - 0.3


def test_a_band_at_the_pelvis_centre_of_mass_lets_the_robot_flip(assets, robot):
    """Why the default band pulls above the torso: ASAP's pelvis attachment is not stable."""
    band = dataclasses.replace(load_sim_config().band, body="pelvis", point_m=(0.0, 0.0, -0.07605))
    physics = make_physics(assets, robot, band)
    run(physics, MotorModel(physics.effort_limit, np.ones(robot.num_joints)), hold_command(robot), 3.0)
    assert tilt_deg(physics.pelvis_quat_wxyz()) > 45.0


def test_pd_command_moves_a_joint_to_its_target(assets, robot):
    physics = make_physics(assets, robot)
    motors = MotorModel(physics.effort_limit, np.ones(robot.num_joints))
    target = np.array(robot.default_q)
    target[LEFT_ELBOW] = 1.0
    run(physics, motors, hold_command(robot, target), 1.0)
    assert physics.q()[LEFT_ELBOW] == pytest.approx(1.0, abs=0.05)
    assert np.abs(physics.q()[:12] - robot.default_q[:12]).max() < 0.1  # the legs held their pose
    assert tilt_deg(physics.pelvis_quat_wxyz()) < 10.0


def test_imu_is_the_pelvis_body_frame_rate_and_specific_force(assets, robot):
    physics = make_physics(assets, robot)
    motors = MotorModel(physics.effort_limit, np.ones(robot.num_joints))
    run(physics, motors, hold_command(robot), 1.0)
    np.testing.assert_allclose(physics.gyro(), physics.data.qvel[3:6])  # free joint: body-frame rate
    acc = physics.accelerometer()
    w, x, y, z = physics.pelvis_quat_wxyz()
    up_in_body = np.array([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])
    np.testing.assert_allclose(acc, GRAVITY * up_in_body, atol=0.3)  # at rest: +g, upwards
    # spin the pelvis about its own (tilted) x axis: the gyro reports it in the body frame
    physics.data.qpos[3:7] = [np.cos(0.25), 0.0, np.sin(0.25), 0.0]  # pitched 0.5 rad
    physics.data.qvel[3:6] = [0.7, 0.0, 0.0]
    mujoco.mj_forward(physics.model, physics.data)
    body_x_in_world = physics.data.xmat[physics.pelvis].reshape(3, 3)[:, 0]
    np.testing.assert_allclose(physics.data.cvel[physics.pelvis][:3], 0.7 * body_x_in_world, atol=1e-9)
    np.testing.assert_allclose(physics.gyro(), [0.7, 0.0, 0.0])


def test_motor_model_pd_law_limits_strength_and_off_modes():
    limit = np.array([10.0, 10.0, 10.0, 10.0])
    motors = MotorModel(limit, torque_scale=np.array([1.0, 1.0, 0.6, 1.0]))
    cmd = MotorCommand(
        enabled=np.array([True, True, True, False]), q=np.array([1.0, 1.0, 1.0, 1.0]),
        dq=np.array([0.0, 2.0, 0.0, 0.0]), tau=np.array([0.5, 0.0, 0.0, 0.0]),
        kp=np.array([2.0, 100.0, 100.0, 2.0]), kd=np.array([0.5, 1.0, 0.0, 0.5]),
    )
    q, dq = np.array([0.5, 0.0, 0.0, 0.5]), np.array([1.0, 0.0, 0.0, 0.0])
    tau = motors.torque(cmd, q, dq)
    np.testing.assert_allclose(tau, [2.0 * 0.5 + 0.5 * (0 - 1.0) + 0.5, 10.0, 6.0, 0.0])
    assert not motors.torque(None, q, dq).any()


def test_command_gate_applies_delay_and_goes_limp_after_timeout():
    cmd_a, cmd_b = (MotorCommand(*(np.zeros(1) for _ in range(6))) for _ in range(2))
    gate = CommandGate(delay_s=0.004, timeout_s=0.1)
    ms = 1_000_000
    gate.push(cmd_a, arrival_ns=0)
    assert gate.update(3 * ms) is None  # not yet in force
    assert gate.update(4 * ms) is cmd_a
    gate.push(cmd_b, arrival_ns=10 * ms)
    assert gate.update(13 * ms) is cmd_a
    assert gate.update(14 * ms) is cmd_b and gate.applied == 2
    assert gate.update(114 * ms) is cmd_b  # exactly the timeout: still in force
    assert gate.update(114 * ms + 1) is None
    assert gate.limp_events == 1 and gate.last_limp_after_s == pytest.approx(0.1, abs=1e-6)
    assert gate.update(200 * ms) is None and gate.limp_events == 1  # one event per loss


def test_thermal_model_first_order_rise_per_joint(robot):
    profile = load_profile("worn", robot.joint_names)
    limit = np.array(robot.tau_limit)
    thermal = ThermalModel(profile.thermal, limit)
    assert (thermal.temperature_c == 30.0).all()
    tau = 0.5 * limit  # steady rise = rise_at_limit / 4
    tau_constant = profile.thermal.time_constant_s
    for _ in range(1000):
        thermal.update(tau, 0.06)  # 60 s: one knee time constant, half a hip's
    rise = thermal.temperature_c - 30.0
    steady = profile.thermal.rise_at_limit_c / 4
    np.testing.assert_allclose(rise, steady * (1 - np.exp(-60.0 / tau_constant)), rtol=1e-6)
    assert rise[KNEES[0]] > rise[0]  # the knees heat faster in this profile


def test_benchmark_physics_step(assets, robot, capsys):
    physics = make_physics(assets, robot)
    motors = MotorModel(physics.effort_limit, np.ones(robot.num_joints))
    cmd = hold_command(robot)
    samples = []
    for _ in range(1000):
        start = time.perf_counter_ns()
        physics.step(motors.torque(cmd, physics.q(), physics.dq()))
        samples.append(time.perf_counter_ns() - start)
    p50, p99 = np.percentile(samples, [50, 99]) / 1e3
    with capsys.disabled():
        print(f"\n  physics + motor step: p50 {p50:.0f} us, p99 {p99:.0f} us (budget {1e6 * physics.timestep:.0f} us)")
