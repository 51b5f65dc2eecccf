"""One control step: state machine + safety checks + policies -> one :class:`JointCommand`.

Commands per mode (29 motors; the wrists, which ASAP's actors do not drive, are held at
their hold pose with their own gains in every mode that applies torque):

- PASSIVE: kp 0, kd ``passive.kd`` (0 = zero torque), motors enabled; after a Reset from
  DAMPING the damping kd stays until Stand (a robot standing in damping does not collapse).
- STAND_UP: targets move linearly from the pose measured when Stand was accepted to the
  default pose over ``stand_up.duration_s``; kp ramps from ``kp_start_fraction`` x deploy kp
  to deploy kp, kd is the deploy kd throughout.
- HOLD with a standing actor (``hold.policy``, as ASAP does): the actor drives the legs every
  step; the other joints' targets (and gains) blend linearly from the previous command to the
  actor's reference pose over ``hold.return_blend_s`` (its ``snap_joints`` start at the
  reference pose) and the actor observes that blended upper body as its reference. Its
  history is reset when HOLD is entered from STAND_UP or TRACKING (not on a Stop in
  PREPARE, where it was already running).
- HOLD without one: PD to the default pose with deploy gains, reached by a linear blend from
  the previous targets over ``hold.return_blend_s``. A G1 cannot balance on ASAP's ankle
  gains this way; it needs a gantry.
- PREPARE: blend from the current targets and gains to the policy's start pose and gains over
  the policy spec's ``prepare.blend_s``, hold ``prepare.hold_s`` (per motion, in
  ``policies/*.yaml``), then reset the policy history -> TRACKING. With a standing actor the
  legs stay under the actor, which observes the blended upper body (ASAP's loco -> mimic
  interpolation).
- TRACKING: ``PolicyRunner.step`` every control step; after the step that reaches phase 1,
  HOLD (blending back to the hold pose).
- DAMPING: kp 0, kd ``damping.kd``, q/dq/tau 0; latched with its reason until Reset.

Clocks: blends, stand-up, PREPARE and the state's age are timed by the ``now_ns`` passed to
:meth:`Controller.request` / :meth:`Controller.step`, the monotonic clock (compared with
``RobotState.arrival_ns``); ``stamp_ns``, system time, only stamps the transitions. A step of
the system clock changes no command. The actor's phase is tick-counted by the policy itself.

Safety: every step in STAND_UP, HOLD, PREPARE and TRACKING runs all checks of
:class:`~asap_ros.core.safety.SafetyMonitor`, checks every actor output before it is clipped (the
motion actor in TRACKING, the standing actor in HOLD and PREPARE: non-finite or beyond the
spec's action clip is a fault) and checks that no joint target moves further than
``safety.max_target_step_rad`` from the previous command; the first fault latches DAMPING and
the damping command goes out in that same step. A motor above ``motion_abort_temperature_c``
ends a running motion (PREPARE, TRACKING) with a return to HOLD, not a fault. In PASSIVE the
checks run too but do not latch (no torque is applied): a failing state makes Stand refused,
and no state value ever reaches a command. DAMPING runs no checks.

``request`` and ``step`` are not thread-safe; the caller serialises them (see control_loop).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.core.errors import ConfigError, RejectedRequest
from asap_ros.core.policy import PolicyOutput, PolicyRunner
from asap_ros.core.robot import RobotModel
from asap_ros.core.safety import (
    SafetyConfig,
    SafetyMonitor,
    check_actor_output,
    check_finite_array,
    check_state_age,
    check_target_step,
    hottest_motor,
)
from asap_ros.core.state import NUM_MOTORS, JointCommand, RobotState
from asap_ros.core.state_machine import (
    FAULT_CHECKED_MODES,
    MOTION_MODES,
    EStop,
    Event,
    Mode,
    Request,
    Reset,
    Stand,
    Start,
    StateMachine,
    Stop,
    Transition,
    describe,
)

__all__ = [
    "Controller",
    "ControllerConfig",
    "EStop",
    "Mode",
    "Reset",
    "Stand",
    "Start",
    "StepOutput",
    "Stop",
    "Transition",
]

def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


_ZERO = _read_only(np.zeros(NUM_MOTORS))
_ENABLED = _read_only(np.ones(NUM_MOTORS, dtype=bool))


# --- configuration ----------------------------------------------------------------------


@dataclass(frozen=True)
class ControllerConfig:
    """Mode timings, passive/damping gains and safety thresholds (``config/controller.yaml``)."""

    stand_up_duration_s: float
    stand_up_kp_start_fraction: float
    return_blend_s: float
    passive_kd: np.ndarray
    """[29] kd in PASSIVE (kp is 0)."""
    damping_kd: np.ndarray
    """[29] kd in DAMPING (kp is 0)."""
    safety: SafetyConfig
    source: str = "<controller config>"
    hold_policy: Path | None = None
    """Spec of the standing actor HOLD runs; ``None``: PD hold of the default pose."""


# --- commands ---------------------------------------------------------------------------


def _command(q: np.ndarray, kp: np.ndarray, kd: np.ndarray) -> JointCommand:
    """A position command with zero feed-forward velocity and torque, all motors enabled."""
    return JointCommand(q=q, dq=_ZERO, tau=_ZERO, kp=kp, kd=kd, enabled=_ENABLED)


@dataclass(frozen=True)
class Blend:
    """Targets and gains moving linearly from one command to another, then held at the end.

    Timed on the monotonic clock; a blend of zero duration is at its end at once.
    """

    start_ns: int
    duration_ns: int
    q0: np.ndarray
    q1: np.ndarray
    kp0: np.ndarray
    kp1: np.ndarray
    kd0: np.ndarray
    kd1: np.ndarray

    @classmethod
    def between(
        cls, start: JointCommand, q: np.ndarray, kp: np.ndarray, kd: np.ndarray, now_ns: int, duration_s: float
    ) -> Blend:
        return cls(now_ns, int(duration_s * 1e9), start.q, q, start.kp, kp, start.kd, kd)

    def elapsed_ns(self, now_ns: int) -> int:
        return now_ns - self.start_ns

    def command(self, now_ns: int) -> JointCommand:
        elapsed = self.elapsed_ns(now_ns)
        s = 1.0 if elapsed >= self.duration_ns or self.duration_ns <= 0 else max(elapsed / self.duration_ns, 0.0)
        return _command(
            self.q0 + s * (self.q1 - self.q0),
            self.kp0 + s * (self.kp1 - self.kp0),
            self.kd0 + s * (self.kd1 - self.kd0),
        )


# --- controller -------------------------------------------------------------------------


@dataclass
class StepOutput:
    command: JointCommand
    mode: Mode
    """Mode after this step."""
    policy: PolicyOutput | None
    """The actor's step (TRACKING, or the step whose output faulted)."""
    transition: Transition | None
    """The oldest mode change not yet reported (one per step, none dropped; see its stamp)."""
    fault: str | None
    """The latched reason while DAMPING."""
    hold_policy: PolicyOutput | None = None
    """The standing actor's step (HOLD and PREPARE with ``hold.policy``, or the step whose output
    faulted); never mixed into ``policy``, which belongs to the motion."""
    motion: str | None = None
    """The motion run this step belongs to (the running motion when the step began; ``None``
    outside one). Taken here, on the control thread: the controller's :attr:`Controller.motion`
    may have moved on by the time another thread reads the step."""


@dataclass
class _Proposal:
    """The command a mode computed for this step, before the target-step check."""

    command: JointCommand
    policy: PolicyOutput | None = None
    hold_policy: PolicyOutput | None = None
    problem: str | None = None
    """A fault found while computing it (failed or wild actor output)."""


class Controller:
    """Turns each robot state into one joint command, per the mode and the safety checks.

    ``policies`` are the motion-tracking actors by motion name. ``hold_policy`` is the standing
    actor HOLD runs (``None``: PD hold); it must be given when ``config.hold_policy``
    names one (:func:`asap_ros.runtime.policies.build_controller` loads it). Opens no files.
    All actors must share one ``phase.control_dt`` (:attr:`control_dt`), the rate the caller
    steps at.
    """

    def __init__(
        self,
        robot: RobotModel,
        policies: Mapping[str, PolicyRunner],
        config: ControllerConfig,
        hold_policy: PolicyRunner | None = None,
    ):
        if robot.num_joints != NUM_MOTORS:
            raise ConfigError(robot.source, "joints", f"controller needs {NUM_MOTORS} motors", robot.num_joints)
        if hold_policy is None and config.hold_policy is not None:
            raise ConfigError(config.source, "hold.policy", "names a standing actor, but none was given to the controller",
                              str(config.hold_policy))
        for name, policy in policies.items():
            _check_policy(name, policy, robot, motion=True)
        if hold_policy is not None:
            _check_policy("hold", hold_policy, robot, motion=False)
        self.robot = robot
        self.policies = dict(policies)
        self.hold_policy = hold_policy
        self.config = config
        self.control_dt = _shared_control_dt([*self.policies.values(), *([hold_policy] if hold_policy else [])])
        """Seconds per control step of every actor (``None`` without actors)."""
        self.last_check: str | None = None
        """Result of the latest safety check (None = healthy; not updated while DAMPING)."""
        self.motion_abort: str | None = None
        """Why the latest motion was aborted to HOLD (a hot motor); cleared by the next Start."""
        self._machine = StateMachine()
        self._monitor = SafetyMonitor(config.safety, robot.joint_names, robot.q_lower, robot.q_upper, robot.dq_limit)
        self._passive = _command(_ZERO, _ZERO, config.passive_kd)
        self._damping = _command(_ZERO, _ZERO, config.damping_kd)
        self._passive_command = self._passive
        """PASSIVE's command: ``passive.kd``, or the damping kd after a Reset from DAMPING."""
        self._stand_kp0 = _read_only(robot.kp * config.stand_up_kp_start_fraction)
        self._blend: Blend | None = None
        self._prepare_end_ns = 0
        """Time after the start of PREPARE at which TRACKING begins (blend + hold)."""
        self._last_command = self._passive
        self._healthy_state: RobotState | None = None
        self._last_valid_state: RobotState | None = None
        """Newest state with a good CRC: used in place of a corrupted sample."""
        self._unreported: deque[Transition] = deque()
        self._step_motion: str | None = None

    @property
    def mode(self) -> Mode:
        return self._machine.mode

    @property
    def fault_reason(self) -> str | None:
        return self._machine.fault_reason

    @property
    def motion(self) -> str | None:
        return self._machine.motion

    @property
    def damping_command(self) -> JointCommand:
        """The DAMPING command (kp 0, ``damping.kd``), read-only."""
        return self._damping

    # --- operator requests -----------------------------------------------------------

    def request(self, req: Request, now_ns: int, stamp_ns: int | None = None) -> None:
        """Validate and apply ``req`` at once; RejectedRequest (state unchanged) if refused.

        ``now_ns``: monotonic clock (blends start here); ``stamp_ns``: system time for the
        transition's stamp (default ``now_ns``, for a caller with one clock).
        """
        stamp_ns = now_ns if stamp_ns is None else stamp_ns
        self._machine.target_of(req)
        if isinstance(req, Stand):
            self._check_can_stand(now_ns)
        elif isinstance(req, Start):
            self._check_can_start(req)
        transition = self._machine.request(req, stamp_ns)
        if transition is not None:
            if isinstance(req, Start):
                self.motion_abort = None
            self._enter(transition, now_ns, self._last_command)

    def _check_can_stand(self, now_ns: int) -> None:
        if self.last_check is not None:
            raise RejectedRequest(f"Stand refused: {self.last_check}")
        if self._healthy_state is None:
            raise RejectedRequest("Stand refused: no healthy robot state received yet")
        stale = check_state_age(self._healthy_state.arrival_ns, now_ns, self.config.safety.max_state_age_ms)
        if stale:
            raise RejectedRequest(f"Stand refused: {stale}")

    def _check_can_start(self, req: Start) -> None:
        if req.motion not in self.policies:
            known = ", ".join(sorted(self.policies)) or "none loaded"
            raise RejectedRequest(f"{describe(req)} refused: unknown motion (known: {known})")
        limit = self.config.safety.max_start_temperature_c
        state = self._healthy_state  # always set in HOLD, the only mode accepting Start
        hot = hottest_motor(state.temperature, limit, self.robot.joint_names) if state is not None else None
        if hot:
            raise RejectedRequest(f"{describe(req)} refused: {hot} is above the start limit {limit:g} C; let it cool")

    def fail(self, reason: str, stamp_ns: int) -> Transition | None:
        """Latch DAMPING with ``reason`` from outside a step (the control loop's last resort after
        a step raised); the transition is returned, not queued. None if DAMPING already was."""
        return self._machine.fault(reason, stamp_ns)

    # --- control step ----------------------------------------------------------------

    def step(self, state: RobotState | None, now_ns: int, late: bool = False, stamp_ns: int | None = None) -> StepOutput:
        """The command for this control tick. Never raises on a bad state: that is a fault.

        ``now_ns``: monotonic clock (blends, state age); ``stamp_ns``: system time for the
        stamps of transitions (default ``now_ns``, for a caller with one clock).
        """
        stamp_ns = now_ns if stamp_ns is None else stamp_ns
        mode = self._machine.mode
        self._step_motion = self._machine.motion
        if mode is Mode.DAMPING:
            return self._output(self._damping)
        problem = self._monitor.check(state, now_ns, late, powered=mode in FAULT_CHECKED_MODES)
        if state is not None and not state.crc_ok:  # counted above; never act on a corrupted sample
            state = self._last_valid_state
            if problem is None:
                problem = (
                    "state CRC mismatch and no valid state yet"
                    if state is None
                    else check_state_age(state.arrival_ns, now_ns, self.config.safety.max_state_age_ms)
                )
        elif state is not None and problem is None:
            self._last_valid_state = state
        self.last_check = problem
        if mode not in FAULT_CHECKED_MODES:  # PASSIVE: report, never latch
            self._healthy_state = state if problem is None else None
            return self._output(self._passive_command)
        if problem is not None:
            return self._fault(problem, now_ns, stamp_ns)
        self._healthy_state = state
        assert state is not None  # a missing state is a fault (problem) above
        if mode in MOTION_MODES:
            self._abort_if_hot(state, now_ns, stamp_ns)
        proposal = self._propose(state, now_ns, stamp_ns)
        problem = proposal.problem or self._target_jump(proposal.command, state)
        if problem is not None:
            return self._fault(problem, now_ns, stamp_ns, proposal.policy, proposal.hold_policy)
        return self._output(proposal.command, proposal.policy, proposal.hold_policy)

    def _propose(self, state: RobotState, now_ns: int, stamp_ns: int) -> _Proposal:
        """This step's command in the current mode (events advance the mode here)."""
        mode = self._machine.mode
        if mode is Mode.TRACKING:
            return self._track(state, now_ns, stamp_ns)
        assert self._blend is not None  # STAND_UP, HOLD and PREPARE each start a blend
        command = self._blend.command(now_ns)
        if mode is Mode.STAND_UP and self._blend.elapsed_ns(now_ns) >= self._blend.duration_ns:
            self._event(Event.STOOD_UP, now_ns, stamp_ns, command)
        elif mode is Mode.PREPARE and self._blend.elapsed_ns(now_ns) >= self._prepare_end_ns:
            self._event(Event.PREPARED, now_ns, stamp_ns, command)
            return self._track(state, now_ns, stamp_ns)
        elif self.hold_policy is not None and mode is not Mode.STAND_UP:
            return self._stand(state, command)
        return _Proposal(command)

    def _abort_if_hot(self, state: RobotState, now_ns: int, stamp_ns: int) -> None:
        """A motor above the abort temperature ends the motion: back to HOLD (the standing actor)."""
        limit = self.config.safety.motion_abort_temperature_c
        hot = hottest_motor(state.temperature, limit, self.robot.joint_names)
        if hot:
            self.motion_abort = f"motion {self.motion} aborted: {hot} is above the abort limit {limit:g} C"
            self._event(Event.MOTOR_HOT, now_ns, stamp_ns, self._last_command, self.motion_abort)

    def _target_jump(self, command: JointCommand, state: RobotState) -> str | None:
        """The target-step check against the command sent last step (every mode that reaches it
        applies position stiffness)."""
        last = self._last_command
        problem = check_target_step(command.q, last.q, last.kp, state.q, self.config.safety.max_target_step_rad,
                                    self.robot.joint_names)
        return f"{self._machine.mode.name}: {problem}" if problem else None

    def _stand(self, state: RobotState, reference: JointCommand) -> _Proposal:
        """The standing actor drives the legs; the other joints follow ``reference`` (a blend)."""
        stand = self.hold_policy
        assert stand is not None  # called only with a hold policy
        try:
            out = stand.step(state, reference.q)
        except Exception as exc:  # a failing actor must end in DAMPING, not a dead control loop
            return _Proposal(self._damping, problem=f"hold policy {stand.spec.name} step failed: {exc!r}")
        command = _command(out.q_target, reference.kp, reference.kd)
        return _Proposal(command, hold_policy=out, problem=_actor_problem(f"hold policy {stand.spec.name}", stand, out))

    def _track(self, state: RobotState, now_ns: int, stamp_ns: int) -> _Proposal:
        motion = self._running_motion()
        policy = self.policies[motion]
        try:
            out = policy.step(state)
        except Exception as exc:  # a failing actor must end in DAMPING, not a dead control loop
            return _Proposal(self._damping, problem=f"policy {motion} step failed: {exc!r}")
        command = _command(out.q_target, policy.kp, policy.kd)
        problem = _actor_problem(f"policy {motion}", policy, out)
        if problem is None and out.done:
            self._event(Event.MOTION_DONE, now_ns, stamp_ns, command)
        return _Proposal(command, policy=out, problem=problem)

    def _event(self, event: Event, now_ns: int, stamp_ns: int, current: JointCommand, reason: str | None = None) -> None:
        self._enter(self._machine.event(event, stamp_ns, reason), now_ns, current)

    def _fault(
        self,
        reason: str,
        now_ns: int,
        stamp_ns: int,
        policy_output: PolicyOutput | None = None,
        hold_output: PolicyOutput | None = None,
    ) -> StepOutput:
        transition = self._machine.fault(reason, stamp_ns)
        if transition is not None:  # None: DAMPING already (never the case here: step returns first)
            self._enter(transition, now_ns, self._damping)
        return self._output(self._damping, policy_output, hold_output)

    def _enter(self, transition: Transition, now_ns: int, current: JointCommand) -> None:
        """Set up the mode just entered; ``current`` is the command in force at the switch."""
        self._unreported.append(transition)
        robot, cfg, mode = self.robot, self.config, transition.to_mode
        self._blend = None
        if mode is Mode.STAND_UP:
            assert self._healthy_state is not None  # Stand is refused without one
            start = _command(self._healthy_state.q.copy(), self._stand_kp0, robot.kd)
            self._blend = Blend.between(start, robot.default_q, robot.kp, robot.kd, now_ns, cfg.stand_up_duration_s)
        elif mode is Mode.HOLD and self.hold_policy is not None:
            stand = self.hold_policy
            q0 = current.q.copy()
            q0[stand.spec.snap_indices] = stand.start_pose[stand.spec.snap_indices]
            start = _command(q0, current.kp, current.kd)
            self._blend = Blend.between(start, stand.start_pose, stand.kp, stand.kd, now_ns, cfg.return_blend_s)
            if transition.from_mode is not Mode.PREPARE:  # after a Stop in PREPARE it keeps running
                stand.reset()
        elif mode is Mode.HOLD:
            self._blend = Blend.between(current, robot.default_q, robot.kp, robot.kd, now_ns, cfg.return_blend_s)
        elif mode is Mode.PREPARE:
            policy = self.policies[self._running_motion()]
            blend_s, hold_s = policy.spec.prepare_blend_s, policy.spec.prepare_hold_s
            self._blend = Blend.between(current, policy.start_pose, policy.kp, policy.kd, now_ns, blend_s)
            self._prepare_end_ns = int((blend_s + hold_s) * 1e9)
        elif mode is Mode.TRACKING:
            self.policies[self._running_motion()].reset()
        elif mode is Mode.PASSIVE:
            self._passive_command = self._damping if transition.from_mode is Mode.DAMPING else self._passive
            self._monitor.reset()
            self._healthy_state = None
            self._last_valid_state = None
            self.last_check = None

    def _running_motion(self) -> str:
        """The motion of PREPARE / TRACKING (the state machine sets it on Start)."""
        motion = self._machine.motion
        assert motion is not None
        return motion

    def _output(
        self, command: JointCommand, policy_output: PolicyOutput | None = None, hold_output: PolicyOutput | None = None
    ) -> StepOutput:
        self._last_command = command
        mode = self._machine.mode
        return StepOutput(
            command=command,
            mode=mode,
            policy=policy_output,
            transition=self._unreported.popleft() if self._unreported else None,
            fault=self._machine.fault_reason if mode is Mode.DAMPING else None,
            hold_policy=hold_output,
            motion=self._step_motion,
        )


def _actor_problem(label: str, policy: PolicyRunner, out: PolicyOutput) -> str | None:
    """The actor's raw output is finite and within its clip, and so are the targets built from it."""
    problem = check_actor_output(out.actor_output, policy.spec.action_clip, policy.spec.driven_joints)
    problem = problem or check_finite_array("target q", out.q_target, (NUM_MOTORS,))
    return f"{label}: {problem}" if problem else None


def _shared_control_dt(policies: list[PolicyRunner]) -> float | None:
    """The one ``phase.control_dt`` of all actors; ConfigError naming the spec that differs."""
    if not policies:
        return None
    first = policies[0].spec
    for policy in policies[1:]:
        if not math.isclose(policy.spec.control_dt, first.control_dt, rel_tol=1e-9):
            problem = f"differs from {first.source} ({first.control_dt:g} s): all actors run at one control rate"
            raise ConfigError(policy.spec.source, "phase.control_dt", problem, policy.spec.control_dt)
    return first.control_dt


def _check_policy(name: str, policy: PolicyRunner, robot: RobotModel, motion: bool) -> None:
    """A motion policy must track a clip, the hold policy must not; both on this robot's joints."""
    if policy.robot.joint_names != robot.joint_names:
        raise ConfigError(policy.spec.source, None, f"policy {name} was built for another joint order")
    if policy.spec.is_motion != motion:
        problem = "a motion policy needs a clip" if motion else "the hold policy must be a standing actor (no clip)"
        raise ConfigError(policy.spec.source, "phase.clip", f"policy {name}: {problem}", str(policy.spec.clip_path))
