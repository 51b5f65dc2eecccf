"""Controller modes and the table of transitions between them.

```
PASSIVE --Stand--> STAND_UP --stood up--> HOLD --Start(m)--> PREPARE --prepared--> TRACKING
   ^                                       ^  <------Stop------'                    |
   |                                       '----------Stop / motion done------------'
   '--Reset-- DAMPING <--EStop or fault-- (any mode; latched with its reason)
```

Operator requests are looked up in :data:`REQUEST_TRANSITIONS`, the controller's own
progress in :data:`EVENT_TRANSITIONS`; anything not in the tables is refused with
:class:`~asap_ros.core.errors.RejectedRequest` and leaves the machine unchanged. DAMPING is left
only by ``Reset`` and only towards PASSIVE, never straight into a motion. Guards that need
data (known motion, motor temperature, a healthy state) are checked by the controller before
it calls :meth:`StateMachine.request`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from asap_ros.core.errors import RejectedRequest


class Mode(enum.Enum):
    PASSIVE = "passive"
    """Zero torque (or the configured passive damping); the operator may handle the robot."""
    STAND_UP = "stand_up"
    """Interpolating from the measured pose to the default pose while the gains ramp up."""
    HOLD = "hold"
    """Standing: ASAP's standing actor balances the legs (``hold.policy`` in config/controller.yaml),
    or, without one, PD to the default pose with deploy gains."""
    PREPARE = "prepare"
    """Blending to the motion's start pose, then holding it, before the actor takes over."""
    TRACKING = "tracking"
    """The motion-tracking actor drives the robot, one step per control tick."""
    DAMPING = "damping"
    """kp 0, damping kd; latched after an e-stop or fault until an operator Reset."""


@dataclass(frozen=True)
class Stand:
    """Stand up from PASSIVE."""


@dataclass(frozen=True)
class Start:
    """Start tracking ``motion`` (a key of the controller's policies) from HOLD."""

    motion: str


@dataclass(frozen=True)
class Stop:
    """Abort the running motion (PREPARE or TRACKING) and return to HOLD."""


@dataclass(frozen=True)
class EStop:
    """Go to DAMPING at once, from any mode."""

    reason: str = "operator e-stop"


@dataclass(frozen=True)
class Reset:
    """Leave DAMPING towards PASSIVE."""


Request = Stand | Start | Stop | EStop | Reset
REQUEST_TYPES: tuple[type, ...] = (Stand, Start, Stop, EStop, Reset)


class Event(enum.Enum):
    """Progress the controller reports to the state machine."""

    STOOD_UP = "stand-up finished"
    PREPARED = "start pose reached and held"
    MOTION_DONE = "motion finished (phase 1)"


@dataclass
class Transition:
    from_mode: Mode
    to_mode: Mode
    reason: str
    stamp_ns: int
    motion: str | None = None
    """The motion run this transition starts, continues or ends (``None`` outside one)."""


REQUEST_TRANSITIONS: dict[tuple[Mode, type], Mode] = {
    (Mode.PASSIVE, Stand): Mode.STAND_UP,
    (Mode.HOLD, Start): Mode.PREPARE,
    (Mode.PREPARE, Stop): Mode.HOLD,
    (Mode.TRACKING, Stop): Mode.HOLD,
    (Mode.DAMPING, Reset): Mode.PASSIVE,
    **{(mode, EStop): Mode.DAMPING for mode in Mode},
}

EVENT_TRANSITIONS: dict[tuple[Mode, Event], Mode] = {
    (Mode.STAND_UP, Event.STOOD_UP): Mode.HOLD,
    (Mode.PREPARE, Event.PREPARED): Mode.TRACKING,
    (Mode.TRACKING, Event.MOTION_DONE): Mode.HOLD,
}

FAULT_CHECKED_MODES = frozenset({Mode.STAND_UP, Mode.HOLD, Mode.PREPARE, Mode.TRACKING})
"""Modes in which a safety fault latches DAMPING (PASSIVE applies no torque to protect)."""

MOTION_MODES = frozenset({Mode.PREPARE, Mode.TRACKING})


def describe(request: Request) -> str:
    """Short text for a request, e.g. ``Start(kick)``."""
    if isinstance(request, Start):
        return f"Start({request.motion})"
    if isinstance(request, EStop):
        return f"EStop({request.reason})"
    return type(request).__name__


class StateMachine:
    """The current mode, the latched fault reason and the running motion."""

    def __init__(self) -> None:
        self.mode = Mode.PASSIVE
        self.fault_reason: str | None = None
        self.motion: str | None = None

    def target_of(self, request: Request) -> Mode:
        """The mode ``request`` leads to from the current mode; RejectedRequest if none."""
        target = REQUEST_TRANSITIONS.get((self.mode, type(request)))
        if target is not None:
            return target
        if self.mode is Mode.DAMPING:
            raise RejectedRequest(
                f"{describe(request)} refused: DAMPING is latched ({self.fault_reason}); "
                "only Reset (to PASSIVE) or EStop are accepted"
            )
        accepted_in = sorted(m.name for (m, kind) in REQUEST_TRANSITIONS if kind is type(request))
        raise RejectedRequest(
            f"{describe(request)} refused in mode {self.mode.name}; accepted in {', '.join(accepted_in)}"
        )

    def request(self, request: Request, now_ns: int) -> Transition | None:
        """Apply an operator request; ``None`` when it keeps the mode (EStop while DAMPING)."""
        target = self.target_of(request)
        if isinstance(request, EStop):
            return self.fault(f"e-stop: {request.reason}", now_ns)
        if isinstance(request, Reset):
            self.fault_reason = None
        return self._enter(target, describe(request), now_ns, request)

    def event(self, event: Event, now_ns: int) -> Transition:
        """Apply the controller's own progress (ValueError if it does not fit the mode)."""
        target = EVENT_TRANSITIONS.get((self.mode, event))
        if target is None:
            raise ValueError(f"event {event.name} does not apply in mode {self.mode.name}")
        return self._enter(target, event.value, now_ns)

    def fault(self, reason: str, now_ns: int) -> Transition | None:
        """Latch DAMPING with ``reason``; the first reason stays while DAMPING is latched."""
        if self.mode is Mode.DAMPING:
            return None
        self.fault_reason = reason
        return self._enter(Mode.DAMPING, reason, now_ns)

    def _enter(self, target: Mode, reason: str, now_ns: int, request: Request | None = None) -> Transition:
        left = self.motion
        from_mode, self.mode = self.mode, target
        if isinstance(request, Start):
            self.motion = request.motion
        elif target not in MOTION_MODES:
            self.motion = None
        return Transition(from_mode, target, reason, now_ns, self.motion or left)
