"""Test support: make a real control step raise, stall, end its thread, see a wild actor output,
or find the system clock stepped.

Read once, when a :class:`~asap_ros.runtime.control_loop.ControlLoop` is built, from the environment
variable ``ASAP_ROS_FAULT_INJECTION``. Absent (always, in operation) nothing is installed and the
loop pays one ``is None`` test per step; set, the loop logs a warning naming it. One or more
``FAULT@TRIGGER`` separated by ``;``::

    raise@tick=120              the step of control tick 120 raises InjectedFault
    slow=0.3@motion_tick=25+    from the motion actor's step 25 on, every step takes 0.3 s longer
    slow=0.025@tick=50+%8       from control tick 50 on, every 8th step takes 25 ms longer (overruns)
    inf@motion_tick=40          the motion actor's raw output[0] is +inf at its step 40
    nan=3@motion_tick=40        ... output[3] is NaN
    exit@tick=300               the control thread ends (SystemExit): no LowCmd, no lease beat
    clock=-10@motion_tick=30    after the motion actor's step 30 the system clock reads 10 s earlier

FAULT is ``raise``, ``slow=SECONDS``, ``exit``, ``inf[=INDEX]``, ``nan[=INDEX]`` (INDEX: the
actor's output index, in its spec's ``driven_joints`` order; default 0) or ``clock=SECONDS``
(a step of the loop's system clock, :attr:`~asap_ros.runtime.clock.Clock.time_ns`, which
stamps LowState arrivals, records and transitions; once, ``+`` refused). TRIGGER is ``tick=N``
(the step whose ``StepRecord.control_tick`` is N; 1 is the first step
after the first LowState) or ``motion_tick=N`` (the motion actor's step N, 0 first, in every TRACKING run); a
trailing ``+`` fires on every later step too, ``+%K`` on every K-th. ``raise``, ``slow`` and ``exit`` act after the
controller computed the step, inside the control loop's step lock (a slow actor, an exception
escaping the step); its command is then not written. ``inf``/``nan`` replace the actor's output
before the policy clips it. ``clock`` acts after the step, as an NTP step or an operator setting
the date between two steps would; durations and deadlines are on the monotonic clock, untouched.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.runtime.clock import Clock

ENV_VAR = "ASAP_ROS_FAULT_INJECTION"
STEP_FAULTS = ("raise", "slow", "exit", "clock")
ACTOR_FAULTS = ("inf", "nan")
_FAULT = re.compile(r"^(?P<kind>[a-z]+)(=(?P<value>[^@]+))?@(?P<counter>tick|motion_tick)=(?P<at>\d+)"
                    r"(?P<repeat>\+?)(%(?P<every>\d+))?$")


class InjectedFault(RuntimeError):
    """What an injected ``raise`` makes the control step raise."""


@dataclass(frozen=True)
class Fault:
    kind: str
    value: float
    """``slow``, ``clock``: seconds; ``inf``/``nan``: output index."""
    counter: str
    """``tick`` or ``motion_tick``."""
    at: int
    repeat: bool
    text: str
    every: int = 1
    """With ``repeat``: every this many steps from ``at`` on (``+%K``)."""

    def fires(self, control_tick: int, motion_tick: int | None) -> bool:
        value = control_tick if self.counter == "tick" else motion_tick
        if value is None:
            return False
        return value >= self.at and (value - self.at) % self.every == 0 if self.repeat else value == self.at


def parse_faults(text: str) -> tuple[Fault, ...]:
    """The faults of one ``ASAP_ROS_FAULT_INJECTION`` value; ConfigError naming the bad part."""
    faults = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        match = _FAULT.match(part)
        if match is None:
            raise _error("expected FAULT@tick=N or FAULT@motion_tick=N, optionally with a trailing +", part)
        kind = match["kind"]
        if kind == "clock" and match["repeat"]:
            raise _error("clock steps once: no trailing +", part)
        every = int(match["every"] or 1)
        if match["every"] is not None and (not match["repeat"] or every < 1):
            raise _error("%K needs a trailing + before it and K >= 1 (every K-th step from N on)", part)
        faults.append(Fault(kind, _value(kind, match["value"], part), match["counter"], int(match["at"]),
                            bool(match["repeat"]), part, every))
    if not faults:
        raise _error("set but empty", text)
    return tuple(faults)


def _value(kind: str, raw: str | None, part: str) -> float:
    if kind not in STEP_FAULTS + ACTOR_FAULTS:
        raise _error(f"unknown fault (known: {', '.join(STEP_FAULTS + ACTOR_FAULTS)})", part)
    if kind in ("raise", "exit"):
        if raw is not None:
            raise _error(f"{kind} takes no value", part)
        return 0.0
    if kind == "slow":
        if raw is None or not re.fullmatch(r"\d+(\.\d*)?|\.\d+", raw) or not float(raw) > 0:
            raise _error("slow needs =SECONDS > 0", part)
        return float(raw)
    if kind == "clock":
        if raw is None or not re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)", raw) or float(raw) == 0:
            raise _error("clock needs =SECONDS, non-zero (negative: backward)", part)
        return float(raw)
    if raw is not None and not raw.isdigit():
        raise _error(f"{kind}= takes an output index >= 0", part)
    return float(raw or 0)


def _error(problem: str, value: str) -> ConfigError:
    return ConfigError(f"${ENV_VAR}", None, problem, value)


class FaultInjection:
    """The parsed faults, hooked into one control loop (:meth:`install`, :meth:`before_step`,
    :meth:`after_step`)."""

    def __init__(self, faults: tuple[Fault, ...]):
        self.faults = faults
        self._control_tick = 0
        self._clock_offset_ns = 0

    @classmethod
    def from_env(cls, environ: Any = os.environ) -> FaultInjection | None:
        """The injection ``ASAP_ROS_FAULT_INJECTION`` asks for, or None when it is not set."""
        text = environ.get(ENV_VAR)
        return None if text is None else cls(parse_faults(text))

    def describe(self) -> str:
        return f"{ENV_VAR}={';'.join(f.text for f in self.faults)}"

    def clock(self, base: Clock) -> Clock:
        """``base``, its system time stepped by the ``clock`` faults that have fired."""
        if not any(f.kind == "clock" for f in self.faults):
            return base
        return Clock(monotonic_ns=base.monotonic_ns, time_ns=lambda: base.time_ns() + self._clock_offset_ns)

    def install(self, controller: Any) -> None:
        """Wrap each motion actor of ``controller`` for the ``inf``/``nan`` faults."""
        faults = [f for f in self.faults if f.kind in ACTOR_FAULTS]
        if not faults:
            return
        for name, runner in controller.policies.items():
            for fault in faults:
                if fault.value >= runner.spec.output_dim:
                    raise _error(f"output index beyond motion {name}'s {runner.spec.output_dim} outputs", fault.text)
            runner.actor = self._corrupting(runner, runner.actor, faults)

    def _corrupting(self, runner: Any, actor: Callable[[np.ndarray], np.ndarray], faults: list[Fault]) -> Callable:
        def corrupted(obs: np.ndarray) -> np.ndarray:
            output = actor(obs)
            for fault in faults:
                if fault.fires(self._control_tick, runner.tick):
                    output[int(fault.value)] = np.inf if fault.kind == "inf" else np.nan
            return output

        return corrupted

    def before_step(self, control_tick: int) -> None:
        """The control tick the step about to run will have."""
        self._control_tick = control_tick

    def after_step(self, output: Any) -> None:
        """Raise, stall or end the thread now if a step fault fires for this step."""
        motion_tick = output.policy.tick if output.policy is not None else None
        for fault in self.faults:
            if fault.kind not in STEP_FAULTS or not fault.fires(self._control_tick, motion_tick):
                continue
            if fault.kind == "slow":
                time.sleep(fault.value)
            elif fault.kind == "clock":
                self._clock_offset_ns += round(fault.value * 1e9)
            elif fault.kind == "raise":
                raise InjectedFault(f"injected by {ENV_VAR} ({fault.text})")
            else:
                raise SystemExit(f"injected by {ENV_VAR} ({fault.text})")
