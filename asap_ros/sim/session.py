"""The scripted operator of a simulated run: stand up, hold, track the clip, hold, exit.

:class:`OperatorScript` is pure: it is told the time and the controller's mode and answers
with the actions an operator would take (controller requests, elastic-band commands). The
real-time ``asap-ros sim`` polls it from its main thread with the wall clock; the lock-step
``asap-ros rollout`` polls it once per control step with the simulated clock. Both therefore
run exactly the same sequence::

    PASSIVE --Stand--> STAND_UP --> HOLD (settle) --Start(motion)--> PREPARE --> TRACKING
      band carries the robot ........^ released, stays off                          |
                                                                         HOLD <-----'
                                                                         hold_after_s --> done

The band carries the robot until something balances it. With a standing actor in HOLD
(``hold.policy``, as ASAP runs its locomotion actor there) that is from the first HOLD on:
the band is released when HOLD is seen and stays off. With the PD hold (no hold policy),
which cannot balance a G1 on ASAP's ankle gains, the band is released only while TRACKING
and attached again when the motion is over, like a gantry rope that an operator slackens
for the motion. A refused Start or a stage that overruns its timeout ends the script at once;
DAMPING ends it after ``hold_after_s`` more (so a fall that follows the fault is seen), with
the reason in :attr:`OperatorScript.outcome`.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from pathlib import Path

from asap_ros.config.clip import MotionClip, load_clip
from asap_ros.config.controller import STAND_UP_DURATION_S, load_controller_config
from asap_ros.config.policy_spec import load_policy_spec, sha256_of
from asap_ros.config.reader import number_problem
from asap_ros.config.robot import load_robot_model
from asap_ros.core.controller import Controller
from asap_ros.core.errors import ConfigError
from asap_ros.core.policy import PolicyRunner
from asap_ros.core.robot import RobotModel
from asap_ros.core.state_machine import Mode, Request, Stand, Start
from asap_ros.runtime.actor import OnnxActor
from asap_ros.runtime.policies import build_controller
from asap_ros.sim.dds_types import BAND_ATTACH, BAND_RELEASE

COMPLETED = "completed"
STAGE_MARGIN_S = 10.0
"""Slack added to the expected duration of a stage before it counts as stuck."""


class Stage(enum.Enum):
    STANDING_UP = "standing up"
    SETTLING = "settling"
    RUNNING_MOTION = "running the motion"
    HOLDING = "holding after the motion"
    DONE = "done"


@dataclass(frozen=True)
class BandAction:
    """A request to the simulator's elastic band (``asap_ros.sim.dds_types`` action names)."""

    action: str
    value: float = 0.0


Action = Request | BandAction


@dataclass(frozen=True)
class SessionPlan:
    """Durations of the scripted sequence (seconds of the run's clock)."""

    motion: str
    stand_up_timeout_s: float
    """From the first Stand to HOLD (the controller's stand-up duration plus a margin)."""
    motion_timeout_s: float
    """From Start to the end of TRACKING (PREPARE + clip duration plus a margin)."""
    settle_s: float = 2.0
    hold_after_s: float = 2.0
    stand_retry_s: float = 5.0
    """How long Stand is retried while the controller refuses it (no healthy state yet)."""
    hold_balances: bool = True
    """HOLD runs a standing actor: the band comes off at the first HOLD and stays off."""


@dataclass(frozen=True)
class Event:
    """One entry of the run's timeline."""

    t_s: float
    what: str


@dataclass
class OperatorScript:
    """The operator of one simulated run; call :meth:`poll` regularly, apply what it returns."""

    plan: SessionPlan
    stage: Stage = Stage.STANDING_UP
    outcome: str | None = None
    """``"completed"``, or why the run ended early; ``None`` while running."""
    timeline: list[Event] = field(default_factory=list)
    tracking_started_s: float | None = None
    tracking_ended_s: float | None = None
    _stage_start_s: float | None = None
    _requested: Request | None = None
    _seen_tracking: bool = False
    _pending_outcome: str | None = None

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    def poll(self, t_s: float, mode: Mode, fault: str | None = None) -> list[Action]:
        """The actions to take now, given the run time and the controller's current mode."""
        if self.finished:
            return []
        if self._stage_start_s is None:
            self._stage_start_s = t_s
        if mode is Mode.DAMPING and self._pending_outcome is None:
            # keep watching for hold_after_s: what the robot does after the fault belongs to the run
            self._pending_outcome = f"aborted while {self.stage.value}: DAMPING ({fault or 'no reason given'})"
            self._next(t_s, Stage.HOLDING, self._pending_outcome)
            return []
        elapsed = t_s - self._stage_start_s
        handler = {
            Stage.STANDING_UP: self._standing_up,
            Stage.SETTLING: self._settling,
            Stage.RUNNING_MOTION: self._running_motion,
            Stage.HOLDING: self._holding,
        }[self.stage]
        return handler(t_s, elapsed, mode)

    def abort(self, t_s: float, reason: str) -> None:
        """End the run early (e.g. the simulator died)."""
        if not self.finished:
            self._end(t_s, f"aborted while {self.stage.value}: {reason}")

    def rejected(self, t_s: float, request: Request, reason: str) -> None:
        """Report that ``request`` was refused (Stand is retried, anything else ends the run)."""
        self._log(t_s, f"refused: {reason}")
        self._requested = None
        started = t_s if self._stage_start_s is None else self._stage_start_s
        if not isinstance(request, Stand) or t_s - started > self.plan.stand_retry_s:
            self._end(t_s, f"aborted while {self.stage.value}: {reason}")

    # --- stages ---------------------------------------------------------------------------
    def _standing_up(self, t_s: float, elapsed: float, mode: Mode) -> list[Action]:
        if mode is Mode.HOLD and self.plan.hold_balances:
            self._next(t_s, Stage.SETTLING, "stood up (HOLD): band released")
            return [BandAction(BAND_RELEASE)]
        if mode is Mode.HOLD:
            self._next(t_s, Stage.SETTLING, "stood up (HOLD)")
            return []
        if elapsed > self.plan.stand_up_timeout_s:
            self._end(t_s, f"aborted: not standing after {self.plan.stand_up_timeout_s:g} s (mode {mode.name})")
            return []
        if mode is Mode.PASSIVE and self._requested is None:
            return self._request(t_s, Stand())
        return []

    def _settling(self, t_s: float, elapsed: float, mode: Mode) -> list[Action]:
        if elapsed < self.plan.settle_s:
            return []
        self._next(t_s, Stage.RUNNING_MOTION, f"settled {self.plan.settle_s:g} s")
        return self._request(t_s, Start(self.plan.motion))

    def _running_motion(self, t_s: float, elapsed: float, mode: Mode) -> list[Action]:
        gantry = not self.plan.hold_balances
        if mode is Mode.TRACKING and not self._seen_tracking:
            self._seen_tracking = True
            self.tracking_started_s = t_s
            self._log(t_s, "TRACKING: band released" if gantry else "TRACKING")
            return [BandAction(BAND_RELEASE)] if gantry else []
        if self._seen_tracking and mode is Mode.HOLD:
            self.tracking_ended_s = t_s
            self._next(t_s, Stage.HOLDING, "motion done (HOLD): band attached" if gantry else "motion done (HOLD)")
            return [BandAction(BAND_ATTACH)] if gantry else []
        if elapsed > self.plan.motion_timeout_s:
            self._end(t_s, f"aborted: motion not finished after {self.plan.motion_timeout_s:g} s (mode {mode.name})")
        return []

    def _holding(self, t_s: float, elapsed: float, mode: Mode) -> list[Action]:
        if elapsed >= self.plan.hold_after_s:
            self._end(t_s, self._pending_outcome or COMPLETED)
        return []

    # --- bookkeeping ----------------------------------------------------------------------
    def _request(self, t_s: float, request: Request) -> list[Action]:
        self._requested = request
        self._log(t_s, f"request {type(request).__name__}")
        return [request]

    def _next(self, t_s: float, stage: Stage, why: str) -> None:
        self._log(t_s, why)
        self.stage = stage
        self._stage_start_s = t_s
        self._requested = None

    def _end(self, t_s: float, outcome: str) -> None:
        self._log(t_s, outcome)
        self.stage = Stage.DONE
        self.outcome = outcome

    def _log(self, t_s: float, what: str) -> None:
        self.timeline.append(Event(round(t_s, 3), what))


# --- what both runners load -----------------------------------------------------------------


@dataclass
class RunSetup:
    """The policy, clip, controller and plan of one simulated run."""

    robot: RobotModel
    policy: PolicyRunner
    clip: MotionClip
    controller: Controller
    plan: SessionPlan


def prepare_run(
    spec_path: str | Path,
    onnx: str | Path | None = None,
    clip: str | Path | None = None,
    stand_up_s: float | None = None,
    assets_dir: str | Path | None = None,
    controller_config: str | Path | None = None,
) -> RunSetup:
    """Load the policy spec (``onnx``/``clip`` override its actor and clip), controller (from
    ``controller_config``, default the package's) and plan."""
    robot = load_robot_model()
    spec = load_policy_spec(spec_path, robot, assets_dir)
    if onnx is not None:
        onnx = _existing(onnx, "--onnx")
        spec = dataclasses.replace(spec, actor_path=onnx, actor_sha256=sha256_of(onnx))
    if clip is not None:
        clip_path = _existing(clip, "--clip")
        spec = dataclasses.replace(spec, clip_path=clip_path, clip_duration_s=load_clip(clip_path).duration_s)
    policy = PolicyRunner(spec, robot, OnnxActor(spec.actor_path, spec))
    config = load_controller_config(_existing(controller_config, "--controller-config") if controller_config else None)
    if stand_up_s is not None:
        problem = number_problem(stand_up_s, False, *STAND_UP_DURATION_S)
        if problem:
            raise ConfigError(None, "--stand-up-s", f"{problem} s", stand_up_s)
        config = dataclasses.replace(config, stand_up_duration_s=stand_up_s)
    controller = build_controller(robot, {spec.name: policy}, config)
    plan = SessionPlan(
        motion=spec.name,
        stand_up_timeout_s=config.stand_up_duration_s + STAGE_MARGIN_S,
        motion_timeout_s=spec.prepare_blend_s + spec.prepare_hold_s + spec.clip_duration_s + STAGE_MARGIN_S,
        hold_balances=controller.hold_policy is not None,
    )
    return RunSetup(robot, policy, load_clip(spec.clip_path), controller, plan)


def _existing(path: str | Path, option: str) -> Path:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(None, option, "file not found", str(path))
    return path
