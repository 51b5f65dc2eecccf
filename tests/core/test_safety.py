"""Every fault check, table-driven, on the real G1 model and the shipped controller config."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import mujoco
import numpy as np
import pytest

from asap_ros.config.controller import read_safety_config
from asap_ros.config.paths import config_file
from asap_ros.config.reader import ConfigReader, load_config
from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError
from asap_ros.core.robot import RobotModel
from asap_ros.core.safety import (
    SafetyConfig,
    SafetyMonitor,
    check_actor_output,
    check_target_step,
    describe_motor_error,
    implausible_temperature,
    torso_tilt_cos,
)
from asap_ros.core.state import NUM_MOTORS, RobotState

NOW = 1_700_000_000_000_000_000
CONFIG = SafetyConfig(
    max_state_age_ms=50.0,
    position_margin_rad=0.1,
    velocity_limit_factor=1.0,
    max_tilt_deg=50.0,
    max_temperature_c=85.0,
    motion_abort_temperature_c=75.0,
    max_start_temperature_c=65.0,
    max_consecutive_late_steps=5,
    max_consecutive_bad_crc=3,
    max_target_step_rad=1.2,
)
KNEE = 3  # left_knee_joint: q in [-0.087267, 2.8798], dq_max 20


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return load_robot_model()


def healthy(robot: RobotModel) -> RobotState:
    """Arrived 2 ms before NOW on the monotonic clock; its system-time stamp is 1 h off, which no
    check may notice."""
    return RobotState(stamp_ns=NOW - 3600 * 10**9, arrival_ns=NOW - 2_000_000, q=robot.default_q.copy(),
                      temperature=np.full(NUM_MOTORS, 40.0))


def quat_about_x(deg: float) -> np.ndarray:
    half = math.radians(deg) / 2
    return np.array([math.cos(half), math.sin(half), 0.0, 0.0])


def setter(field: str, index: int | None, value: object) -> Callable[[RobotState], None]:
    def apply(state: RobotState) -> None:
        if index is None:
            setattr(state, field, value)
        else:
            getattr(state, field)[index] = value

    return apply


# (id, corruption of a healthy state, expected substring of the reason or None = healthy)
STATE_CASES = [
    ("healthy", lambda s: None, None),
    ("age at limit", setter("arrival_ns", None, NOW - 50_000_000), None),
    ("stale", setter("arrival_ns", None, NOW - 50_000_001), "stale robot state: 50.0 ms old"),
    ("system stamp far ahead", setter("stamp_ns", None, NOW + 10 * 10**9), None),
    ("nan q", setter("q", KNEE, np.nan), "state q[3] is nan"),
    ("inf dq", setter("dq", 0, np.inf), "state dq[0] is inf"),
    ("nan tau_est", setter("tau_est", 28, np.nan), "state tau_est[28] is nan"),
    ("nan temperature", setter("temperature", 5, np.nan), "state temperature[5] is nan"),
    ("nan quaternion", setter("quat_wxyz", 2, np.nan), "state quat_wxyz[2] is nan"),
    ("inf gyro", setter("gyro", 1, -np.inf), "state gyro[1] is -inf"),
    ("nan acc", setter("acc", 2, np.nan), "state acc[2] is nan"),
    ("short q", setter("q", None, np.zeros(28)), "state q has shape (28,), expected (29,)"),
    ("non-numeric q", setter("q", None, ["a"] * 29), "state q is not numeric"),
    ("q inside margin", setter("q", KNEE, 2.8798 + 0.099), None),
    ("q above limit", setter("q", KNEE, 2.8798 + 0.11), "joint left_knee_joint at 2.990 rad is outside"),
    ("q below limit", setter("q", KNEE, -0.087267 - 0.11), "joint left_knee_joint at -0.197 rad"),
    ("dq at limit", setter("dq", KNEE, -20.0), None),
    ("dq over limit", setter("dq", KNEE, -20.01), "joint left_knee_joint speed -20.01 rad/s exceeds"),
    ("tilt 45 deg", setter("quat_wxyz", None, quat_about_x(45.0)), None),
    ("tilt 55 deg", setter("quat_wxyz", None, quat_about_x(55.0)), "torso tilt 55.0 deg exceeds 50 deg"),
    ("upside down", setter("quat_wxyz", None, quat_about_x(180.0)), "torso tilt 180.0 deg"),
    ("zero quaternion", setter("quat_wxyz", None, np.zeros(4)), "IMU quaternion norm 0.000 is not 1"),
    ("temperature at limit", setter("temperature", KNEE, 85.0), None),
    ("overheating", setter("temperature", KNEE, 86.0), "overheating: motor left_knee_joint at 86 C (limit 85 C)"),
    ("motor error", setter("motor_error", KNEE, 0x200),
     "motor left_knee_joint reports error state 0x00000200 (winding overheating)"),
    ("motor error bits", setter("motor_error", 28, 0x10001),
     "motor right_wrist_yaw_joint reports error state 0x00010001 (overcurrent, unknown bits 0x10000)"),
]


@pytest.mark.parametrize(("corrupt", "expected"), [c[1:] for c in STATE_CASES], ids=[c[0] for c in STATE_CASES])
def test_state_checks(robot: RobotModel, corrupt, expected) -> None:
    monitor = SafetyMonitor(CONFIG, robot.joint_names, robot.q_lower, robot.q_upper, robot.dq_limit)
    state = healthy(robot)
    corrupt(state)
    reason = monitor.check(state, NOW, late=False)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason


def test_missing_state_is_a_fault(robot: RobotModel) -> None:
    monitor = SafetyMonitor(CONFIG, robot.joint_names, robot.q_lower, robot.q_upper, robot.dq_limit)
    assert monitor.check(None, NOW, late=False) == "no robot state received"


@pytest.mark.parametrize(
    ("kind", "limit"),
    [("late", CONFIG.max_consecutive_late_steps), ("bad_crc", CONFIG.max_consecutive_bad_crc)],
)
def test_consecutive_counters(robot: RobotModel, kind: str, limit: int) -> None:
    """limit-1 bad steps pass, one good step resets the count, limit in a row faults."""
    monitor = SafetyMonitor(CONFIG, robot.joint_names, robot.q_lower, robot.q_upper, robot.dq_limit)

    def step(bad: bool) -> str | None:
        state = healthy(robot)
        state.crc_ok = not (bad and kind == "bad_crc")
        return monitor.check(state, NOW, late=bad and kind == "late")

    for _ in range(2):
        assert [step(True) for _ in range(limit - 1)] == [None] * (limit - 1)
        assert step(False) is None
    assert [step(True) for _ in range(limit - 1)] == [None] * (limit - 1)
    reason = step(True)
    what = "late control steps" if kind == "late" else "state CRC mismatches"
    assert reason == f"{limit} consecutive {what} (limit {limit})"
    monitor.reset()
    assert step(True) is None


def test_late_steps_count_even_without_state(robot: RobotModel) -> None:
    monitor = SafetyMonitor(CONFIG, robot.joint_names, robot.q_lower, robot.q_upper, robot.dq_limit)
    for _ in range(CONFIG.max_consecutive_late_steps - 1):
        monitor.check(None, NOW, late=True)
    assert "consecutive late control steps" in monitor.check(healthy(robot), NOW, late=True)


DRIVEN = tuple(f"joint{i}" for i in range(23))


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (np.zeros(23, np.float32), None),
        (np.r_[np.zeros(22), 100.0], None),
        (np.r_[np.zeros(22), -100.0], None),
        (np.r_[np.zeros(22), np.nan], "actor output[22] (joint22) is nan"),
        (np.r_[np.inf, np.zeros(22)], "actor output[0] (joint0) is inf"),
        (np.r_[0.0, -np.inf, np.zeros(21)], "actor output[1] (joint1) is -inf"),
        (np.r_[np.zeros(3), 100.01, np.zeros(19)], "actor output[3] (joint3) = 100.01 is beyond the action clip +-100"),
        (np.zeros(22), "actor output has shape (22,), expected (23,)"),
    ],
    ids=["zero", "at clip", "at -clip", "nan", "inf", "-inf", "beyond clip", "short"],
)
def test_actor_output_is_checked_before_clipping(output: np.ndarray, expected: str | None) -> None:
    assert check_actor_output(output, 100.0, DRIVEN) == expected


def test_target_step_compares_stiff_joints_with_their_target_and_limp_ones_with_their_position(robot) -> None:
    names, previous = robot.joint_names, robot.default_q.copy()
    measured = previous + 0.5
    stiff, limp = robot.kp.copy(), np.zeros(NUM_MOTORS)
    target = previous.copy()
    target[KNEE] += 1.2
    assert check_target_step(target, previous, stiff, measured, 1.2, names) is None  # at the limit
    target[KNEE] += 0.01
    assert check_target_step(target, previous, stiff, measured, 1.2, names) == (
        "target of left_knee_joint jumps 1.210 rad in one step (0.300 -> 1.510 rad; limit 1.2 rad)")
    assert check_target_step(target, previous, limp, measured, 1.2, names) is None  # 0.71 from its position
    target[KNEE] = np.nan
    assert "left_knee_joint jumps nan rad" in check_target_step(target, previous, stiff, measured, 1.2, names)


def test_motor_error_bits_are_named() -> None:
    assert describe_motor_error(0x8201) == "0x00008201 (overcurrent, winding overheating, motor locked)"


@pytest.mark.parametrize("seed", range(5))
def test_tilt_matches_projected_gravity_from_mujoco(seed: int) -> None:
    """cos(tilt) equals -z of gravity rotated into the body frame (MuJoCo's quaternion maths)."""
    rng = np.random.default_rng(seed)
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    inverse, gravity_body = np.zeros(4), np.zeros(3)
    mujoco.mju_negQuat(inverse, quat)
    mujoco.mju_rotVecQuat(gravity_body, np.array([0.0, 0.0, -1.0]), inverse)
    assert torso_tilt_cos(quat) == pytest.approx(-gravity_body[2], abs=1e-12)


def shipped_safety_section() -> dict:
    return dict(load_config(config_file("controller.yaml")).section("safety").data)


def test_shipped_config_reads() -> None:
    config = read_safety_config(load_config(config_file("controller.yaml")).section("safety"))
    assert config.max_start_temperature_c <= config.motion_abort_temperature_c <= config.max_temperature_c
    assert config.max_consecutive_late_steps >= 1


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"max_start_temperature_c": 80}, r"safety.max_start_temperature_c: must not exceed motion_abort_temperature_c"),
        ({"motion_abort_temperature_c": 90}, r"safety.motion_abort_temperature_c: must not exceed max_temperature_c"),
        ({"max_target_step_rad": 0}, r"safety.max_target_step_rad: out of range: allowed 0.01 <= value \(got 0\)"),
        ({"max_tilt_deg": 0}, r"safety.max_tilt_deg: out of range: allowed 1 <= value <= 180 \(got 0\)"),
        ({"max_consecutive_bad_crc": 1.5}, r"safety.max_consecutive_bad_crc: must be an integer \(got 1.5\)"),
        ({"max_tilt_dgr": 30}, r"safety.max_tilt_dgr: unknown key"),
        ({"max_state_age_ms": None}, r"safety.max_state_age_ms: must be a number"),
    ],
    ids=["start above abort", "abort above limit", "no target step", "tilt zero", "float count", "typo", "null"],
)
def test_bad_safety_config_names_file_key_value(change: dict, match: str) -> None:
    data = shipped_safety_section() | change
    with pytest.raises(ConfigError, match=match) as error:
        read_safety_config(ConfigReader(data, "controller.yaml", "safety"))
    assert error.value.file == "controller.yaml"


def test_a_state_whose_tick_does_not_advance_ages_from_its_first_arrival(robot: RobotModel) -> None:
    """A frozen or replayed stream: new arrivals of a tick already seen do not make it fresh."""
    monitor = SafetyMonitor(CONFIG, robot.joint_names, robot.q_lower, robot.q_upper, robot.dq_limit)
    first = dataclasses.replace(healthy(robot), tick=100, arrival_ns=NOW - 2_000_000)
    assert monitor.check(first, NOW, late=False) is None
    for age_ms, tick in ((20, 100), (40, 99)):  # the same tick again, then an older one (a replay)
        later = dataclasses.replace(first, tick=tick, arrival_ns=NOW + age_ms * 1_000_000)
        assert monitor.check(later, NOW + age_ms * 1_000_000, late=False) is None  # 42 ms: still within 50
    frozen = dataclasses.replace(first, arrival_ns=NOW + 60_000_000)
    problem = monitor.check(frozen, NOW + 60_000_000, late=False)
    assert problem == "stale robot state: 62.0 ms old (limit 50 ms): robot tick 100 does not advance past 100"
    advancing = dataclasses.replace(first, tick=101, arrival_ns=NOW + 61_000_000)
    assert monitor.check(advancing, NOW + 61_000_000, late=False) is None


def test_a_restarted_robot_tick_is_a_new_baseline_only_when_unpowered(robot: RobotModel) -> None:
    monitor = SafetyMonitor(CONFIG, robot.joint_names, robot.q_lower, robot.q_upper, robot.dq_limit)
    assert monitor.check(dataclasses.replace(healthy(robot), tick=5000), NOW, late=False) is None
    restarted = dataclasses.replace(healthy(robot), tick=3, arrival_ns=NOW + 60_000_000)
    assert "does not advance" in (monitor.check(restarted, NOW + 61_000_000, late=False) or "")
    assert monitor.check(restarted, NOW + 61_000_000, late=False, powered=False) is None


def test_a_mode_machine_change_while_powered_is_a_fault(robot: RobotModel) -> None:
    monitor = SafetyMonitor(CONFIG, robot.joint_names, robot.q_lower, robot.q_upper, robot.dq_limit)
    state = dataclasses.replace(healthy(robot), tick=1, mode_machine=5)
    assert monitor.check(state, NOW, late=False) is None
    changed = dataclasses.replace(state, tick=2, mode_machine=6)
    assert monitor.check(changed, NOW, late=False) == ("robot mode_machine changed from 5 to 6 while the motors "
                                                       "are powered")
    assert monitor.check(changed, NOW, late=False, powered=False) is None  # PASSIVE: the new baseline
    assert monitor.check(dataclasses.replace(changed, tick=3), NOW, late=False) is None


def test_implausible_temperatures_are_named() -> None:
    names = tuple(f"m{i}" for i in range(NUM_MOTORS))
    temps = np.full(NUM_MOTORS, 40.0)
    assert implausible_temperature(temps, names) is None
    temps[7] = 0.0
    assert implausible_temperature(temps, names).startswith("implausible temperature reading: motor m7 at 0 C")
    temps[7], temps[2] = 40.0, 400.0
    assert "motor m2 at 400 C" in implausible_temperature(temps, names)
