"""The simulator's side of the hg protocol: raw ``rt/lowcmd`` in, raw ``rt/lowstate`` out.

Commands are checked like the G1 does (size, CRC, ``mode_machine``) plus sanity checks the
simulator adds (finite values, non-negative gains, mode 0/1); every rejection is counted
and nothing rejected reaches the motors.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from asap_ros.core.quaternion import rpy_from_quat
from asap_ros.core.state import NUM_MOTORS
from asap_ros.g1.crc import record_crc
from asap_ros.g1.layout import LOWCMD_WIRE, LOWSTATE_LAYOUT, LOWSTATE_WIRE, MOTOR_ENABLED, MOTOR_OFF
from asap_ros.sim.motors import CommandGate, MotorCommand
from asap_ros.sim.profile import SensorNoise
from asap_ros.sim.rotations import perturb_quat


@dataclass
class IntakeCounters:
    received: int = 0
    accepted: int = 0
    bad_crc: int = 0
    malformed: int = 0
    wrong_mode_machine: int = 0
    dropped_by_profile: int = 0
    last_problem: str = ""


class LowCmdIntake:
    """Validates each raw LowCmd sample and hands accepted ones to the :class:`CommandGate`."""

    def __init__(self, gate: CommandGate, mode_machine: int, drop_probability: float, rng: np.random.Generator):
        self.gate = gate
        self.mode_machine = mode_machine
        self.drop_probability = drop_probability
        self.counters = IntakeCounters()
        self._rng = rng
        self._lock = threading.Lock()

    def on_payload(self, payload: bytes, _stamp_ns: int, _writer: int) -> None:
        """DDS callback for one ``rt/lowcmd`` sample."""
        arrival_ns = time.monotonic_ns()
        with self._lock:
            self.counters.received += 1
            command = self._validated(payload)
            if command is None:
                return
            if self.drop_probability and self._rng.random() < self.drop_probability:
                self.counters.dropped_by_profile += 1
                return
            self.counters.accepted += 1
            self.gate.push(command, arrival_ns)

    def _validated(self, payload: bytes) -> MotorCommand | None:
        """The command in ``payload``, or ``None`` after counting why it is refused."""
        try:
            record = LOWCMD_WIRE.from_cdr(payload)
        except ValueError as exc:
            return self._reject("malformed", str(exc))
        if int(record["crc"]) != record_crc(record):
            return self._reject("bad_crc", "CRC mismatch")
        if int(record["mode_machine"]) != self.mode_machine:
            problem = f"mode_machine {int(record['mode_machine'])} != robot's {self.mode_machine}"
            return self._reject("wrong_mode_machine", problem)
        motors = record["motor_cmd"][:NUM_MOTORS]
        problem = command_problem(motors)
        if problem:
            return self._reject("malformed", problem)
        return motor_command(motors)

    def _reject(self, counter: str, problem: str) -> None:
        setattr(self.counters, counter, getattr(self.counters, counter) + 1)
        self.counters.last_problem = problem


def command_problem(motors: np.ndarray) -> str:
    """Why a CRC-valid command's driven slots are unusable ("" if they are fine)."""
    modes = motors["mode"]
    if not np.isin(modes, (MOTOR_OFF, MOTOR_ENABLED)).all():
        bad = int(np.flatnonzero(~np.isin(modes, (MOTOR_OFF, MOTOR_ENABLED)))[0])
        return f"motor {bad}: mode {int(modes[bad])} is neither 0 (off) nor 1 (enabled)"
    for name in ("q", "dq", "tau", "kp", "kd"):
        values = motors[name]
        if not np.isfinite(values).all():
            return f"motor {int(np.flatnonzero(~np.isfinite(values))[0])}: {name} is not finite"
    for name in ("kp", "kd"):
        if (motors[name] < 0).any():
            return f"motor {int(np.flatnonzero(motors[name] < 0)[0])}: negative {name}"
    return ""


def motor_command(motors: np.ndarray) -> MotorCommand:
    return MotorCommand(
        enabled=motors["mode"] == MOTOR_ENABLED,
        q=motors["q"].astype(np.float64),
        dq=motors["dq"].astype(np.float64),
        tau=motors["tau"].astype(np.float64),
        kp=motors["kp"].astype(np.float64),
        kd=motors["kd"].astype(np.float64),
    )


@dataclass
class RobotReading:
    """What the robot's sensors see at one instant (true values; noise is added on encoding)."""

    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    tau: np.ndarray
    temperature_c: np.ndarray
    enabled: np.ndarray
    quat_wxyz: np.ndarray
    gyro: np.ndarray
    acc: np.ndarray
    imu_temperature_c: float


class LowStateEncoder:
    """Builds the raw ``rt/lowstate`` sample (XCDR1 with CRC) in one preallocated record."""

    def __init__(self, mode_machine: int, noise: SensorNoise, rng: np.random.Generator):
        self.noise = noise
        self._rng = rng
        self.record = np.zeros((), dtype=LOWSTATE_LAYOUT)
        self.record["mode_machine"] = mode_machine
        self._motors = self.record["motor_state"][:NUM_MOTORS]
        self._imu = self.record["imu_state"]

    def encode(self, tick: int, reading: RobotReading) -> bytes:
        rng, noise, motors, imu = self._rng, self.noise, self._motors, self._imu
        self.record["tick"] = tick & 0xFFFFFFFF
        quat = perturb_quat(reading.quat_wxyz, noise.quat, rng)
        imu["quaternion"] = quat
        imu["gyroscope"] = reading.gyro + rng.normal(0.0, noise.gyro, 3) if noise.gyro else reading.gyro
        imu["accelerometer"] = reading.acc
        imu["rpy"] = rpy_from_quat(quat)
        imu["temperature"] = round(reading.imu_temperature_c)
        motors["mode"] = reading.enabled
        motors["q"] = reading.q + rng.normal(0.0, noise.q, NUM_MOTORS) if noise.q else reading.q
        motors["dq"] = reading.dq + rng.normal(0.0, noise.dq, NUM_MOTORS) if noise.dq else reading.dq
        motors["ddq"] = reading.ddq
        motors["tau_est"] = reading.tau
        motors["temperature"] = np.round(reading.temperature_c)[:, None]  # winding and casing sensors alike
        self.record["crc"] = record_crc(self.record)
        return LOWSTATE_WIRE.to_cdr(self.record)
