"""The G1's joint motors as the simulator models them.

Each motor runs the PD law on the latest command every physics step
(``tau = kp (q_t - q) + kd (dq_t - dq) + tau_ff``, zero when its mode is off), clipped to its
effort limit and scaled by the profile's strength. A command takes effect after the
profile's actuation delay; with no command for ``command_timeout`` the motors go limp.
Motor error bits and temperatures can be overridden over the simulator's control topic to
provoke the runtime's motor-health checks.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np

from asap_ros.sim.profile import ThermalParams


@dataclass(frozen=True)
class MotorCommand:
    """One validated LowCmd for the driven motors (motor order)."""

    enabled: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    kp: np.ndarray
    kd: np.ndarray


class MotorModel:
    """PD torque of the motors for a command and the measured joint state."""

    def __init__(self, effort_limit: np.ndarray, torque_scale: np.ndarray):
        self.effort_limit = np.asarray(effort_limit, dtype=np.float64)
        self.torque_scale = np.asarray(torque_scale, dtype=np.float64)

    def torque(self, cmd: MotorCommand | None, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """Output torque; ``None`` (limp) gives zero."""
        if cmd is None:
            return np.zeros_like(self.effort_limit)
        tau = cmd.kp * (cmd.q - q) + cmd.kd * (cmd.dq - dq) + cmd.tau
        np.clip(tau, -self.effort_limit, self.effort_limit, out=tau)
        tau *= self.torque_scale
        tau[~cmd.enabled] = 0.0
        return tau


class ThermalModel:
    """First-order winding temperature: ``T -> ambient + rise_at_limit (tau / limit)^2``."""

    def __init__(self, params: ThermalParams, effort_limit: np.ndarray):
        self.ambient_c = params.ambient_c
        self._gain = params.rise_at_limit_c / np.square(effort_limit)
        self._time_constant = params.time_constant_s
        self.temperature_c = np.full(len(effort_limit), params.ambient_c)

    def update(self, tau: np.ndarray, dt: float) -> None:
        target = self.ambient_c + self._gain * np.square(tau)
        self.temperature_c += (target - self.temperature_c) * -np.expm1(-dt / self._time_constant)


class MotorHealthOverrides:
    """Motor health the simulator reports instead of its models (set over its control topic):
    error bits per motor, and temperatures that replace the thermal model's."""

    def __init__(self, motors: int):
        self.error = np.zeros(motors, dtype=np.uint32)
        self._temperature_c = np.full(motors, np.nan)  # NaN: the model's

    def set_temperature(self, motors: slice | int, celsius: float) -> None:
        self._temperature_c[motors] = celsius

    def release_temperature(self, motors: slice | int) -> None:
        self._temperature_c[motors] = np.nan

    def temperature(self, model_c: np.ndarray) -> np.ndarray:
        """The reported temperatures: the override where set, else the model's."""
        return np.where(np.isnan(self._temperature_c), model_c, self._temperature_c)


class CommandGate:
    """Which command the motors act on now: actuation delay, then the command timeout.

    ``push`` may be called from any thread (the DDS thread); ``update`` from the physics thread.
    Timestamps are ``time.monotonic_ns()``.
    """

    def __init__(self, delay_s: float, timeout_s: float):
        self._delay_ns = int(round(delay_s * 1e9))
        self._timeout_ns = int(round(timeout_s * 1e9))
        self._pending: collections.deque[tuple[int, MotorCommand]] = collections.deque()
        self.current: MotorCommand | None = None
        self._effective_ns = 0
        self.applied = 0
        self.limp_events = 0
        self.last_limp_after_s = math.nan
        """Time from the last command taking effect to the motors going limp (last event)."""

    def push(self, cmd: MotorCommand, arrival_ns: int) -> None:
        self._pending.append((arrival_ns + self._delay_ns, cmd))

    def update(self, now_ns: int) -> MotorCommand | None:
        """The command in force at ``now_ns`` (``None``: limp)."""
        pending = self._pending
        while pending and pending[0][0] <= now_ns:
            self._effective_ns, self.current = pending.popleft()
            self.applied += 1
        if self.current is not None and now_ns - self._effective_ns > self._timeout_ns:
            self.current = None
            self.limp_events += 1
            self.last_limp_after_s = (now_ns - self._effective_ns) / 1e9
        return self.current
