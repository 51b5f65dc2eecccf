"""The Controller with the real G1 model, the shipped config and the real CR7 actor (ONNX Runtime).

The robot itself cannot run here: :class:`Rig` stands in for the G1's LowState stream. It
stamps each state on both of the controller's clocks (monotonic ``now``, system time ``wall``,
which a test may step) and lets the joints follow the commanded targets exactly (no
dynamics), which is all the mode logic needs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import pytest
import yaml

from asap_ros.config.controller import load_controller_config
from asap_ros.config.paths import config_file, policies_dir
from asap_ros.config.robot import load_robot_model
from asap_ros.core.controller import (
    Blend,
    Controller,
    ControllerConfig,
    EStop,
    Mode,
    Reset,
    Stand,
    Start,
    StepOutput,
    Stop,
)
from asap_ros.core.errors import ConfigError, RejectedRequest
from asap_ros.core.policy import PolicyRunner
from asap_ros.core.robot import RobotModel
from asap_ros.core.state import NUM_MOTORS, JointCommand, RobotState
from asap_ros.runtime.policies import load_policy_runner
from asap_ros.testing.actors import corrupted_runner

MOTION = "CR7_level1"
T0 = 1_700_000_000_000_000_000
"""System time at the start of a rig."""
MONO0 = 5_000_000_000
"""Monotonic clock at the start of a rig."""
DT = 0.02
KNEE = 3
WRISTS = [19, 20, 21, 26, 27, 28]
ACTIVE = (Mode.STAND_UP, Mode.HOLD, Mode.PREPARE, Mode.TRACKING)


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return load_robot_model()


@pytest.fixture(scope="module")
def config() -> ControllerConfig:
    """The shipped config with the PD hold (HOLD with the standing actor: tests/core/test_loco.py) and
    no target-step limit: the rig's joints jump to their targets (no dynamics), so the actor
    swings joints between their limits (right ankle pitch, 1.4 rad at tick 95); the limit has
    its own tests below."""
    shipped = load_controller_config()
    return dataclasses.replace(shipped, hold_policy=None,
                               safety=dataclasses.replace(shipped.safety, max_target_step_rad=100.0))


@pytest.fixture(scope="module")
def runners(robot: RobotModel) -> list[PolicyRunner]:
    """Two independent CR7 runners (real ONNX actor), so twin rigs never share history."""
    return [load_policy_runner(policies_dir() / f"{MOTION}.yaml", robot) for _ in range(2)]


class Rig:
    """A Controller fed by a stand-in LowState stream whose joints follow the targets."""

    def __init__(self, robot: RobotModel, config: ControllerConfig, runner: PolicyRunner):
        self.robot = robot
        self.controller = Controller(robot, {MOTION: runner}, config)
        self.runner = runner
        self.now = MONO0
        self.wall_offset = T0 - MONO0
        """System time minus monotonic clock (a step of the system clock changes it)."""
        self.q = np.linspace(-0.05, 0.05, NUM_MOTORS)  # limp, hanging: not the default pose
        self.outputs: list[StepOutput] = []

    @property
    def wall(self) -> int:
        return self.now + self.wall_offset

    def state(self) -> RobotState:
        return RobotState(
            stamp_ns=self.wall - 1_000_000, arrival_ns=self.now - 1_000_000, q=self.q.copy(),
            tick=self.now // 2_000_000,  # the robot's 500 Hz counter
            temperature=np.full(NUM_MOTORS, 40.0),
        )

    def step(
        self, dt: float = DT, corrupt: Callable[[RobotState], RobotState | None] | None = None, late: bool = False
    ) -> StepOutput:
        self.now += int(round(dt * 1e9))
        state = self.state()
        if corrupt is not None:
            state = corrupt(state)
        out = self.controller.step(state, self.now, late, stamp_ns=self.wall)
        if out.mode in ACTIVE:
            self.q = out.command.q.copy()
        self.outputs.append(out)
        return out

    def request(self, req) -> None:
        self.controller.request(req, self.now, self.wall)

    def bring_to(self, mode: Mode) -> None:
        self.step()
        if mode is Mode.PASSIVE:
            return
        if mode is Mode.DAMPING:
            self.request(EStop("test"))
            self.step()
            return
        self.request(Stand())
        self.step()
        if mode is Mode.STAND_UP:
            return
        self.step(self.controller.config.stand_up_duration_s)
        if mode is Mode.HOLD:
            return
        self.request(Start(MOTION))
        self.step()
        if mode is Mode.PREPARE:
            return
        self.step(self.runner.spec.prepare_blend_s + self.runner.spec.prepare_hold_s)
        assert self.controller.mode is Mode.TRACKING

    def transitions(self) -> list[tuple[Mode, Mode]]:
        return [(o.transition.from_mode, o.transition.to_mode) for o in self.outputs if o.transition]


@pytest.fixture
def rig(robot: RobotModel, config: ControllerConfig, runners: list[PolicyRunner]) -> Rig:
    return Rig(robot, config, runners[0])


def assert_damping(out: StepOutput, config: ControllerConfig) -> None:
    assert out.mode is Mode.DAMPING
    cmd = out.command
    np.testing.assert_array_equal(cmd.kd, config.damping_kd)
    for array in (cmd.q, cmd.dq, cmd.tau, cmd.kp):
        np.testing.assert_array_equal(array, np.zeros(NUM_MOTORS))
    assert cmd.enabled.all()


# --- configuration ----------------------------------------------------------------------


def test_shipped_config(config: ControllerConfig) -> None:
    assert load_controller_config().hold_policy == policies_dir() / "dec_loco_stand.yaml"
    assert config.stand_up_duration_s == 10.0
    np.testing.assert_array_equal(config.passive_kd, np.zeros(NUM_MOTORS))
    assert config.damping_kd.shape == (NUM_MOTORS,) and config.damping_kd[KNEE] == 8.0
    assert config.damping_kd[WRISTS].tolist() == [1.0] * 6


def _edited(section: str, key: str, value) -> dict:
    data = yaml.safe_load(config_file("controller.yaml").read_text())
    if key:
        data[section][key] = value
    else:
        data[section] = value
    return data


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (_edited("damping", "kd", [8.0] * 28), r"damping.kd: must have 29 entries, has 28"),
        (_edited("passive", "kd", -1.0), r"passive.kd: out of range: allowed 0 <= value \(got -1.0\)"),
        (_edited("stand_up", "kp_start_fraction", 1.5), r"stand_up.kp_start_fraction: out of range: allowed 0 <= value <= 1 \(got 1.5\)"),
        (_edited("hold", "return_blend", 2.0), r"hold.return_blend: unknown key"),
        (_edited("prepare", None, {"blend_s": 1.5}), r"prepare: unknown key"),
        ({k: v for k, v in _edited("hold", None, None).items() if k != "hold"}, r"hold: required key missing"),
    ],
    ids=["short kd list", "negative kd", "fraction above 1", "typo", "prepare lives in policy specs", "missing"],
)
def test_bad_config_names_file_key_value(tmp_path, data: dict, match: str) -> None:
    path = tmp_path / "controller.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=match) as error:
        load_controller_config(path)
    assert error.value.file == str(path)


def test_policy_for_another_joint_order_is_refused(robot, config, runners) -> None:
    other = dataclasses.replace(robot, joint_names=tuple(reversed(robot.joint_names)))
    with pytest.raises(ConfigError, match=f"policy {MOTION} was built for another joint order"):
        Controller(other, {MOTION: runners[0]}, config)


# --- the nominal cycle ------------------------------------------------------------------


def test_full_cycle(rig: Rig, robot: RobotModel, config: ControllerConfig) -> None:
    """PASSIVE -> STAND_UP -> HOLD -> PREPARE -> TRACKING -> (phase 1) HOLD, command by command."""
    out = rig.step()
    assert out.mode is Mode.PASSIVE and out.transition is None
    np.testing.assert_array_equal(out.command.kp, np.zeros(NUM_MOTORS))
    np.testing.assert_array_equal(out.command.kd, config.passive_kd)

    measured = rig.q.copy()
    rig.request(Stand())
    assert rig.controller.mode is Mode.STAND_UP
    half = config.stand_up_duration_s / 2
    out = rig.step(half)
    np.testing.assert_allclose(out.command.q, (measured + robot.default_q) / 2)
    fraction = config.stand_up_kp_start_fraction
    np.testing.assert_allclose(out.command.kp, robot.kp * (fraction + (1 - fraction) / 2))
    np.testing.assert_array_equal(out.command.kd, robot.kd)
    out = rig.step(half - DT)
    assert out.mode is Mode.STAND_UP
    out = rig.step()
    assert out.mode is Mode.HOLD
    np.testing.assert_allclose(out.command.q, robot.default_q)
    np.testing.assert_array_equal(out.command.kp, robot.kp)

    runner = rig.runner
    rig.request(Start(MOTION))
    assert (rig.controller.mode, rig.controller.motion) == (Mode.PREPARE, MOTION)
    out = rig.step(runner.spec.prepare_blend_s / 2)
    np.testing.assert_allclose(out.command.q, (robot.default_q + runner.start_pose) / 2)
    out = rig.step(runner.spec.prepare_blend_s / 2)
    np.testing.assert_allclose(out.command.q, runner.start_pose)
    np.testing.assert_array_equal(out.command.kp, runner.kp)
    out = rig.step(runner.spec.prepare_hold_s - DT)
    assert out.mode is Mode.PREPARE and out.policy is None
    np.testing.assert_allclose(out.command.q, runner.start_pose)

    out = rig.step()
    assert out.mode is Mode.TRACKING and out.policy.tick == 0
    ticks = [out.policy.tick]
    while out.mode is Mode.TRACKING:
        np.testing.assert_array_equal(out.command.q, out.policy.q_target)
        np.testing.assert_array_equal(out.command.kp, runner.kp)
        out = rig.step()
        ticks.append(out.policy.tick)
    expected_ticks = math.ceil(runner.spec.clip_duration_s / DT) - 1
    assert ticks == list(range(expected_ticks)) and out.policy.done
    assert out.mode is Mode.HOLD and out.transition.reason == "motion finished (phase 1)"
    last_target = out.command.q.copy()

    out = rig.step(config.return_blend_s / 2)
    assert out.policy is None
    np.testing.assert_allclose(out.command.q, (last_target + robot.default_q) / 2)
    out = rig.step(config.return_blend_s / 2)
    np.testing.assert_allclose(out.command.q, robot.default_q)
    assert rig.transitions() == [
        (Mode.PASSIVE, Mode.STAND_UP),
        (Mode.STAND_UP, Mode.HOLD),
        (Mode.HOLD, Mode.PREPARE),
        (Mode.PREPARE, Mode.TRACKING),
        (Mode.TRACKING, Mode.HOLD),
    ]
    assert rig.controller.motion is None


def test_steps_and_transitions_carry_the_motion_they_belong_to(rig: Rig) -> None:
    """The label is stamped on the step itself: the last TRACKING step (after which the
    controller's own ``motion`` is already ``None``) and the transition out of TRACKING still name
    the motion, so a publisher reading the step later on another thread labels it right."""
    rig.bring_to(Mode.TRACKING)
    out = rig.outputs[-1]
    while out.mode is Mode.TRACKING:
        out = rig.step()
    assert out.policy.done and rig.controller.motion is None
    tracked = [o for o in rig.outputs if o.policy is not None]
    assert tracked and all(o.motion == MOTION for o in tracked)
    assert all(o.motion is None for o in rig.outputs if o.mode in (Mode.PASSIVE, Mode.STAND_UP))
    labels = [(o.transition.to_mode, o.transition.motion) for o in rig.outputs if o.transition]
    assert labels == [
        (Mode.STAND_UP, None), (Mode.HOLD, None), (Mode.PREPARE, MOTION), (Mode.TRACKING, MOTION), (Mode.HOLD, MOTION)
    ]
    assert rig.step().motion is None


def test_policy_history_is_reset_for_each_run(rig: Rig) -> None:
    """Two runs from the same pose give the same first observations: history starts at zero."""
    rig.bring_to(Mode.TRACKING)
    first_run = [rig.outputs[-1].policy.obs]
    first_run += [rig.step().policy.obs for _ in range(5)]
    rig.request(Stop())
    rig.step(rig.controller.config.return_blend_s)  # back at the default pose, as before the first run
    rig.request(Start(MOTION))
    rig.step()
    rig.step(rig.runner.spec.prepare_blend_s + rig.runner.spec.prepare_hold_s)
    second_run = [rig.outputs[-1].policy.obs] + [rig.step().policy.obs for _ in range(5)]
    assert rig.outputs[-6].policy.tick == 0
    np.testing.assert_allclose(np.array(second_run), np.array(first_run), atol=1e-6)


@pytest.mark.parametrize("mode", [Mode.HOLD, Mode.PREPARE, Mode.TRACKING], ids=lambda m: m.name)
def test_wrists_held_with_wrist_gains(rig: Rig, robot: RobotModel, mode: Mode) -> None:
    rig.bring_to(mode)
    out = rig.step(5.0 if mode is not Mode.TRACKING else DT)
    hold_pose = robot.default_q if mode is Mode.HOLD else rig.runner.start_pose
    np.testing.assert_allclose(out.command.q[WRISTS], hold_pose[WRISTS])
    np.testing.assert_array_equal(out.command.kp[WRISTS], robot.kp[WRISTS])
    assert (out.command.kp[WRISTS] > 0).all()


@pytest.mark.parametrize("mode", [Mode.PREPARE, Mode.TRACKING], ids=lambda m: m.name)
def test_stop_returns_to_hold_blending_from_current_targets(rig: Rig, robot, config, mode: Mode) -> None:
    rig.bring_to(mode)
    current = rig.outputs[-1].command.q.copy()
    rig.request(Stop())
    out = rig.step(config.return_blend_s / 4)
    assert out.mode is Mode.HOLD and out.transition.to_mode is Mode.HOLD and out.policy is None
    np.testing.assert_allclose(out.command.q, current + (robot.default_q - current) / 4)
    assert rig.controller.motion is None


def test_every_transition_is_reported_once_in_order(rig: Rig) -> None:
    """Two requests between steps: both transitions come out, one per step, with their stamps."""
    rig.bring_to(Mode.HOLD)
    before = len(rig.transitions())
    stamp = rig.wall  # transitions are stamped on the system clock
    rig.request(Start(MOTION))
    rig.request(Stop())
    first, second, third = rig.step(), rig.step(), rig.step()
    assert (first.transition.from_mode, first.transition.to_mode) == (Mode.HOLD, Mode.PREPARE)
    assert (second.transition.from_mode, second.transition.to_mode) == (Mode.PREPARE, Mode.HOLD)
    assert first.transition.stamp_ns == second.transition.stamp_ns == stamp
    assert third.transition is None and len(rig.transitions()) == before + 2


# --- faults -----------------------------------------------------------------------------


def _set(field: str, index: int | None, value) -> Callable[[RobotState], RobotState]:
    def corrupt(state: RobotState) -> RobotState:
        if index is None:
            setattr(state, field, value)
        else:
            getattr(state, field)[index] = value
        return state

    return corrupt


def _stale(state: RobotState) -> RobotState:
    state.arrival_ns -= 60_000_000  # 61 ms old at the step
    return state


def _tilted(deg: float) -> np.ndarray:
    return np.array([math.cos(math.radians(deg) / 2), 0.0, math.sin(math.radians(deg) / 2), 0.0])


# (id, corruption, late flag, consecutive steps needed (None = config key), reason substring)
FAULTS = [
    ("no state", lambda s: None, False, 1, "no robot state received"),
    ("stale state", _stale, False, 1, "stale robot state: 61.0 ms old"),
    ("nan joint position", _set("q", KNEE, np.nan), False, 1, "state q[3] is nan"),
    ("inf gyro", _set("gyro", 0, np.inf), False, 1, "state gyro[0] is inf"),
    ("malformed state", _set("dq", None, np.zeros(12)), False, 1, "state dq has shape (12,)"),
    ("joint limit", _set("q", KNEE, 3.1), False, 1, "joint left_knee_joint at 3.100 rad is outside"),
    ("joint speed", _set("dq", KNEE, 25.0), False, 1, "joint left_knee_joint speed 25.00 rad/s"),
    ("torso tilt", _set("quat_wxyz", None, _tilted(70.0)), False, 1, "torso tilt 70.0 deg"),
    ("overheating", _set("temperature", KNEE, 95.0), False, 1, "overheating: motor left_knee_joint at 95 C"),
    ("motor error", _set("motor_error", KNEE, 0x200), False, 1,
     "motor left_knee_joint reports error state 0x00000200 (winding overheating)"),
    ("deadline misses", None, True, "max_consecutive_late_steps", "consecutive late control steps"),
    # corrupted samples are never used: the last valid one ages until it is stale (3 x 20 ms)
    ("bad crc", _set("crc_ok", None, False), False, 3, "stale robot state: 61.0 ms old"),
]


def _steps_needed(config: ControllerConfig, needed: int | str) -> int:
    return needed if isinstance(needed, int) else getattr(config.safety, needed)


@pytest.mark.parametrize("mode", ACTIVE, ids=lambda m: m.name)
@pytest.mark.parametrize(("corrupt", "late", "needed", "reason"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_fault_latches_damping_in_every_active_mode(rig: Rig, config, mode, corrupt, late, needed, reason) -> None:
    rig.bring_to(mode)
    count = _steps_needed(config, needed)
    for _ in range(count - 1):
        assert rig.step(corrupt=corrupt, late=late).mode is mode
    out = rig.step(corrupt=corrupt, late=late)
    assert_damping(out, config)
    assert reason in out.fault and out.fault == rig.controller.fault_reason
    assert (out.transition.from_mode, out.transition.to_mode) == (mode, Mode.DAMPING)
    assert out.transition.reason == out.fault
    assert rig.controller.motion is None


@pytest.mark.parametrize(("corrupt", "late", "needed", "reason"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_passive_never_latches_and_never_passes_state_through(rig: Rig, config, corrupt, late, needed, reason) -> None:
    """In PASSIVE the checks run (no torque to protect): the command stays passive, Stand is refused."""
    rig.bring_to(Mode.PASSIVE)
    for _ in range(_steps_needed(config, needed)):
        out = rig.step(corrupt=corrupt, late=late)
        assert out.mode is Mode.PASSIVE and out.fault is None and out.transition is None
        np.testing.assert_array_equal(out.command.q, np.zeros(NUM_MOTORS))
        np.testing.assert_array_equal(out.command.kp, np.zeros(NUM_MOTORS))
        np.testing.assert_array_equal(out.command.kd, config.passive_kd)
    assert reason in rig.controller.last_check
    with pytest.raises(RejectedRequest, match="Stand refused"):
        rig.request(Stand())
    assert rig.controller.mode is Mode.PASSIVE
    rig.step()
    rig.request(Stand())
    assert rig.controller.mode is Mode.STAND_UP


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (np.nan, "policy CR7_level1: actor output[5] (left_ankle_roll_joint) is nan"),
        (np.inf, "policy CR7_level1: actor output[5] (left_ankle_roll_joint) is inf"),
        (-np.inf, "policy CR7_level1: actor output[5] (left_ankle_roll_joint) is -inf"),
        (100.5, "policy CR7_level1: actor output[5] (left_ankle_roll_joint) = 100.5 is beyond the action clip +-100"),
        (FloatingPointError("actor diverged"), "policy CR7_level1 step failed: FloatingPointError('actor diverged')"),
    ],
    ids=["nan", "inf", "-inf", "beyond clip", "raise"],
)
def test_actor_output_is_checked_before_clipping(robot, config, runners, value, reason: str) -> None:
    """A wild raw output latches DAMPING in that step: never a clipped joint-limit target at full kp."""
    rig = Rig(robot, config, corrupted_runner(runners[0], 3, 5, value))
    rig.bring_to(Mode.TRACKING)  # ran tick 0
    for _ in range(2):
        assert rig.step().mode is Mode.TRACKING
    out = rig.step()
    assert_damping(out, config)
    assert out.fault == reason
    if not isinstance(value, Exception):
        assert out.policy.tick == 3  # recorded with the step, never sent
        np.testing.assert_array_equal(out.policy.actor_output[5], np.float32(value))
        if not np.isnan(value):
            assert abs(out.policy.raw_action[5]) <= 100  # clipping alone would have sent this


def test_an_output_at_the_clip_is_no_fault(robot, config, runners) -> None:
    rig = Rig(robot, config, corrupted_runner(runners[0], 3, 5, 100.0))
    rig.bring_to(Mode.TRACKING)
    outputs = [rig.step() for _ in range(3)]
    assert [o.mode for o in outputs] == [Mode.TRACKING] * 3


@pytest.mark.parametrize("mode", list(Mode), ids=lambda m: m.name)
def test_estop_from_every_mode(rig: Rig, config, mode: Mode) -> None:
    rig.bring_to(mode)
    first = rig.controller.fault_reason
    rig.request(EStop("operator button"))
    out = rig.step()
    assert_damping(out, config)
    if mode is Mode.DAMPING:
        assert out.fault == first and out.transition is None
    else:
        assert out.fault == "e-stop: operator button"
        assert (out.transition.from_mode, out.transition.to_mode) == (mode, Mode.DAMPING)


def test_damping_is_left_only_by_reset(rig: Rig, config) -> None:
    """Every request and hundreds of healthy steps: DAMPING holds until Reset, then PASSIVE."""
    rig.bring_to(Mode.TRACKING)
    out = rig.step(corrupt=_set("quat_wxyz", None, _tilted(80.0)))
    reason = out.fault
    refused = [Stand(), Start(MOTION), Start("unknown"), Stop()]
    for i in range(300):
        for req in refused:
            with pytest.raises(RejectedRequest, match="DAMPING is latched"):
                rig.request(req)
        rig.request(EStop("again"))
        out = rig.step(dt=DT if i % 50 else 30.0)
        assert_damping(out, config)
        assert out.fault == reason and out.transition is None
    rig.request(Reset())
    out = rig.step()
    assert out.mode is Mode.PASSIVE and out.fault is None and rig.controller.fault_reason is None
    assert (out.transition.from_mode, out.transition.to_mode) == (Mode.DAMPING, Mode.PASSIVE)
    np.testing.assert_array_equal(out.command.kp, np.zeros(NUM_MOTORS))
    np.testing.assert_array_equal(out.command.kd, config.damping_kd)  # damping kept until Stand: no collapse
    rig.step()
    rig.request(Stand())
    assert rig.step().mode is Mode.STAND_UP


def test_passive_at_start_up_applies_the_passive_kd(rig: Rig, config) -> None:
    out = rig.step()
    assert out.mode is Mode.PASSIVE
    np.testing.assert_array_equal(out.command.kd, config.passive_kd)


def test_reset_forgets_the_consecutive_counters_and_the_last_state(rig: Rig, config) -> None:
    rig.bring_to(Mode.HOLD)
    for _ in range(config.safety.max_consecutive_late_steps - 1):
        rig.step(late=True)
    rig.request(EStop("test"))
    rig.step(late=True)
    rig.request(Reset())
    with pytest.raises(RejectedRequest, match="no healthy robot state received yet"):
        rig.request(Stand())
    assert rig.step(late=True).mode is Mode.PASSIVE
    assert rig.controller.last_check is None  # counter restarted at the Reset


# --- refused requests -------------------------------------------------------------------

REJECTIONS = [
    ("stand twice", Mode.STAND_UP, Stand(), None, "Stand refused in mode STAND_UP; accepted in PASSIVE"),
    ("start in passive", Mode.PASSIVE, Start(MOTION), None, "refused in mode PASSIVE; accepted in HOLD"),
    ("start while standing up", Mode.STAND_UP, Start(MOTION), None, "refused in mode STAND_UP"),
    ("start while tracking", Mode.TRACKING, Start(MOTION), None, "refused in mode TRACKING"),
    ("unknown motion", Mode.HOLD, Start("kick"), None, "Start(kick) refused: unknown motion (known: CR7_level1)"),
    ("hot motor", Mode.HOLD, Start(MOTION), 70.0, "motor left_knee_joint at 70 C is above the start limit 65 C"),
    ("stop in hold", Mode.HOLD, Stop(), None, "Stop refused in mode HOLD"),
    ("stop while standing up", Mode.STAND_UP, Stop(), None, "Stop refused in mode STAND_UP"),
    ("reset in hold", Mode.HOLD, Reset(), None, "Reset refused in mode HOLD; accepted in DAMPING"),
    ("reset in tracking", Mode.TRACKING, Reset(), None, "Reset refused in mode TRACKING"),
    ("stand in damping", Mode.DAMPING, Stand(), None, "DAMPING is latched (e-stop: test)"),
    ("start in damping", Mode.DAMPING, Start(MOTION), None, "only Reset (to PASSIVE) or EStop"),
]


@pytest.mark.parametrize(("mode", "req", "hot", "match"), [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS])
def test_rejected_request_leaves_state_unchanged(robot, config, runners, mode, req, hot, match) -> None:
    """A twin rig that never got the request produces exactly the same next commands."""
    rig, twin = Rig(robot, config, runners[0]), Rig(robot, config, runners[1])
    for r in (rig, twin):
        r.bring_to(mode)
        if hot is not None:
            r.step(corrupt=_set("temperature", KNEE, hot))
    before = (rig.controller.mode, rig.controller.fault_reason, rig.controller.motion)
    with pytest.raises(RejectedRequest) as refused:
        rig.request(req)
    assert match in str(refused.value)
    assert (rig.controller.mode, rig.controller.fault_reason, rig.controller.motion) == before
    for _ in range(3):
        out, twin_out = rig.step(), twin.step()
        assert out.mode is twin_out.mode and out.transition == twin_out.transition
        np.testing.assert_array_equal(out.command.q, twin_out.command.q)
        np.testing.assert_array_equal(out.command.kp, twin_out.command.kp)


def test_stand_needs_a_fresh_healthy_state(rig: Rig, config) -> None:
    with pytest.raises(RejectedRequest, match="no healthy robot state received yet"):
        rig.request(Stand())
    rig.step()
    rig.now += int(2 * config.safety.max_state_age_ms * 1e6)
    with pytest.raises(RejectedRequest, match="Stand refused: stale robot state"):
        rig.request(Stand())
    assert rig.controller.mode is Mode.PASSIVE


@pytest.mark.parametrize("mode", [Mode.HOLD, Mode.TRACKING], ids=lambda m: m.name)
def test_corrupted_sample_is_never_acted_on(robot: RobotModel, config, runners, mode: Mode) -> None:
    """A bad-CRC sample with garbage values: no fault below the limit, and the command is the
    one a twin controller computes from the last valid sample."""
    rig, twin = Rig(robot, config, runners[0]), Rig(robot, config, runners[1])
    for r in (rig, twin):
        r.bring_to(mode)
    last_valid = rig.state()
    rig.controller.step(last_valid, rig.now)
    twin.controller.step(last_valid, twin.now)

    def garbage(state: RobotState) -> RobotState:
        state.crc_ok = False
        state.q[:] = np.nan
        return state

    for _ in range(config.safety.max_consecutive_bad_crc - 1):
        rig.now += 1_000_000
        twin.now = rig.now
        out = rig.controller.step(garbage(rig.state()), rig.now)
        expected = twin.controller.step(last_valid, twin.now)
        assert out.mode is mode and out.fault is None
        np.testing.assert_array_equal(out.command.q, expected.command.q)


@pytest.mark.parametrize("mode", ACTIVE, ids=lambda m: m.name)
def test_consecutive_bad_crc_fault_before_staleness(robot: RobotModel, config, runners, mode: Mode) -> None:
    """At 500 Hz LowState a run of bad CRCs faults on the count, before the last valid sample is stale."""
    config = dataclasses.replace(config, safety=dataclasses.replace(config.safety, max_consecutive_bad_crc=2))
    rig = Rig(robot, config, runners[0])
    rig.bring_to(mode)
    assert rig.step(dt=0.002, corrupt=_set("crc_ok", None, False)).mode is mode
    out = rig.step(dt=0.002, corrupt=_set("crc_ok", None, False))
    assert_damping(out, config)
    assert out.fault == "2 consecutive state CRC mismatches (limit 2)"


# --- clocks -----------------------------------------------------------------------------


@pytest.mark.parametrize("step_s", [10.0, -10.0], ids=["ahead", "back"])
@pytest.mark.parametrize("mode", [Mode.STAND_UP, Mode.HOLD, Mode.PREPARE, Mode.TRACKING], ids=lambda m: m.name)
def test_a_system_clock_step_changes_no_command(robot, config, runners, mode: Mode, step_s: float) -> None:
    """Twin rigs; in one the system clock steps by +-10 s one step into the mode: every command,
    mode and transition stays the same through the rest of the mode and the next, except the
    transitions' stamps (system time), which carry the step."""
    rig, twin = Rig(robot, config, runners[0]), Rig(robot, config, runners[1])
    for r in (rig, twin):
        r.bring_to(mode)
    rig.wall_offset += int(step_s * 1e9)
    steps = {Mode.STAND_UP: 520, Mode.HOLD: 60, Mode.PREPARE: 140, Mode.TRACKING: 60}[mode]
    transitions = 0
    for _ in range(steps):
        out, expected = rig.step(), twin.step()
        assert (out.mode, out.fault) == (expected.mode, expected.fault)
        for name in ("q", "kp", "kd"):
            np.testing.assert_array_equal(getattr(out.command, name), getattr(expected.command, name))
        assert (out.transition is None) == (expected.transition is None)
        if out.transition is not None:
            transitions += 1
            assert dataclasses.replace(out.transition, stamp_ns=0) == dataclasses.replace(expected.transition, stamp_ns=0)
            assert out.transition.stamp_ns - expected.transition.stamp_ns == int(step_s * 1e9)
    assert transitions == (1 if mode in (Mode.STAND_UP, Mode.PREPARE) else 0)  # -> HOLD, -> TRACKING
    assert rig.controller.mode is not Mode.DAMPING


def test_a_zero_length_blend_is_at_its_end_at_once(robot) -> None:
    start = JointCommand(q=np.zeros(NUM_MOTORS), kp=np.zeros(NUM_MOTORS), kd=np.zeros(NUM_MOTORS))
    blend = Blend.between(start, robot.default_q, robot.kp, robot.kd, now_ns=1_000, duration_s=0.0)
    for now_ns in (0, 1_000, 2_000):  # before its start too: never a division by zero
        np.testing.assert_array_equal(blend.command(now_ns).q, robot.default_q)
        np.testing.assert_array_equal(blend.command(now_ns).kp, robot.kp)


# --- per-step target change limit --------------------------------------------------------


def _target_step_fault(rig: Rig, config: ControllerConfig, mode: Mode, joint: str) -> StepOutput:
    """The next step latches DAMPING from ``mode`` for a target jump of ``joint``."""
    out = rig.step()
    assert_damping(out, config)
    assert out.fault.startswith(f"{mode.name}: target of {joint} jumps ")
    assert out.fault.endswith(f"rad; limit {config.safety.max_target_step_rad:g} rad)")
    rig.step()  # reports the DAMPING transition if the request's was still queued
    assert (mode, Mode.DAMPING) in rig.transitions()
    return out


@pytest.fixture
def limited(config: ControllerConfig) -> ControllerConfig:
    """The shipped target-step limit (the module's config lifts it for the no-dynamics rig)."""
    return dataclasses.replace(config, safety=load_controller_config().safety)


def test_stand_up_target_is_compared_with_the_measured_pose_of_a_limp_joint(robot, limited, runners) -> None:
    """PASSIVE has no stiffness: the first stand-up target is checked against where the joint is.
    A knee that swung 2.3 rad between the Stand and the first stand-up step faults."""
    rig = Rig(robot, limited, runners[0])
    rig.step()
    rig.request(Stand())
    rig.q[KNEE] += 2.3
    _target_step_fault(rig, limited, Mode.STAND_UP, "left_knee_joint")


def test_a_one_step_prepare_blend_to_a_far_pose_faults(robot, limited, runners) -> None:
    """The shortest blend the loader accepts (one control step) is a jump: to a start pose 2.5 rad
    away it latches DAMPING instead of being sent."""
    real = runners[0]
    pose = real.spec.prepare_pose.copy()
    pose[16] += 2.5  # left shoulder roll
    spec = dataclasses.replace(real.spec, prepare_blend_s=real.spec.control_dt, prepare_pose=pose)
    rig = Rig(robot, limited, PolicyRunner(spec, robot, real.actor))
    rig.bring_to(Mode.HOLD)
    rig.step(limited.return_blend_s)
    rig.request(Start(MOTION))
    _target_step_fault(rig, limited, Mode.PREPARE, "left_shoulder_roll_joint")


def test_a_wild_actor_output_within_the_clip_is_a_target_jump(robot, limited, runners) -> None:
    """Raw output 10 on the knee (inside +-100) targets the knee's upper limit: a jump, a fault."""
    rig = Rig(robot, limited, corrupted_runner(runners[0], 3, KNEE, 10.0))
    rig.bring_to(Mode.TRACKING)
    assert [rig.step().mode for _ in range(2)] == [Mode.TRACKING] * 2
    out = _target_step_fault(rig, limited, Mode.TRACKING, "left_knee_joint")
    assert out.policy.q_target[KNEE] == pytest.approx(0.25 * 10.0 + 0.3)  # what would have gone out, at kp 200


# --- motor temperature, graded -------------------------------------------------------------


@pytest.mark.parametrize("mode", [Mode.PREPARE, Mode.TRACKING], ids=lambda m: m.name)
def test_a_motor_above_the_abort_level_returns_the_motion_to_hold(rig: Rig, robot, config, mode: Mode) -> None:
    rig.bring_to(mode)
    last = rig.outputs[-1].command.q.copy()
    hot = _set("temperature", KNEE, 80.0)
    out = rig.step(corrupt=hot)
    reason = f"motion {MOTION} aborted: motor left_knee_joint at 80 C is above the abort limit 75 C"
    assert out.mode is Mode.HOLD and out.fault is None and rig.controller.fault_reason is None
    assert (out.transition.from_mode, out.transition.to_mode, out.transition.reason) == (mode, Mode.HOLD, reason)
    assert rig.controller.motion_abort == reason and rig.controller.motion is None and out.policy is None
    np.testing.assert_array_equal(out.command.q, last)  # the return blend starts at the motion's last targets
    for _ in range(5):  # standing is allowed while hot; no motion starts
        assert rig.step(corrupt=hot).mode is Mode.HOLD
    with pytest.raises(RejectedRequest, match="motor left_knee_joint at 80 C is above the start limit 65 C"):
        rig.request(Start(MOTION))
    out = rig.step(corrupt=_set("temperature", KNEE, 86.0))
    assert_damping(out, config)
    assert out.fault == "overheating: motor left_knee_joint at 86 C (limit 85 C)"


def test_a_warm_motor_refuses_start_but_keeps_a_running_motion(rig: Rig) -> None:
    rig.bring_to(Mode.TRACKING)
    for _ in range(3):
        assert rig.step(corrupt=_set("temperature", KNEE, 70.0)).mode is Mode.TRACKING
    assert rig.controller.motion_abort is None


# --- control rate --------------------------------------------------------------------------


def test_actors_with_another_control_dt_are_refused(robot, config, runners) -> None:
    real = runners[0]
    other = PolicyRunner(dataclasses.replace(real.spec, control_dt=0.01), robot, real.actor)
    with pytest.raises(ConfigError, match=r"CR7_level1\.yaml: phase\.control_dt: differs from .*CR7_level1\.yaml "
                                          r"\(0\.02 s\): all actors run at one control rate \(got 0\.01\)"):
        Controller(robot, {MOTION: real, "other": other}, config)
    assert Controller(robot, {MOTION: real}, config).control_dt == 0.02
