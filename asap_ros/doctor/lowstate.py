"""The robot's ``rt/lowstate`` stream: rate and gaps, CRC, ``mode_machine``, IMU, joints, motors.

:class:`LowStateSampler` keeps every raw sample of a window with its arrival time (monotonic);
:func:`analyse_lowstate` judges them afterwards, off the receive thread. Motor error states are
read straight from the hg wire layout (``motor_state[i].motorstate``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from asap_ros.core.robot import RobotModel
from asap_ros.core.safety import QUATERNION_NORM_TOLERANCE, SafetyConfig
from asap_ros.core.state import NUM_MOTORS
from asap_ros.doctor.report import Check, fail, ok, warn
from asap_ros.g1.codec import decode_lowstate_cdr
from asap_ros.g1.layout import LOWSTATE_TOPIC, LOWSTATE_WIRE

GRAVITY = 9.81
GRAVITY_TOLERANCE = 1.5
"""|accelerometer| (median over the window) may differ from gravity by this much, m/s^2."""
RATE_TOLERANCE = 0.1
"""A measured rate further than this fraction from the expected one is a warning."""


@dataclass(frozen=True)
class LowStateExpectations:
    """What a healthy stream looks like (from the controller config, the robot model, the options)."""

    rate_hz: float
    mode_machine: int | None
    """The value the robot must report; ``None``: any."""
    safety: SafetyConfig
    robot: RobotModel


@dataclass
class LowStateWindow:
    """Raw samples (XCDR1 payloads) and their arrival times (``time.monotonic_ns``)."""

    payloads: list[bytes]
    arrivals_ns: list[int]
    end_ns: int
    """When the window closed (monotonic)."""
    source: str
    """Where it was read (domain, interface), for the messages."""


class LowStateSampler:
    """Collects ``rt/lowstate`` on this process's DDS participant (a reader: it writes nothing)."""

    def __init__(self) -> None:
        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowState_

        from asap_ros.runtime.dds import RawReader

        self._payloads: list[bytes] = []
        self._arrivals_ns: list[int] = []
        self._first = threading.Event()
        self._lock = threading.Lock()
        self._reader = RawReader(LOWSTATE_TOPIC, LowState_, self._on_sample, depth=1024)

    def _on_sample(self, payload: bytes, _stamp_ns: int, _writer: int) -> None:
        with self._lock:
            self._payloads.append(payload)
            self._arrivals_ns.append(time.monotonic_ns())
        self._first.set()

    def collect(self, duration_s: float, first_timeout_s: float, source: str) -> LowStateWindow:
        """Wait up to ``first_timeout_s`` for the first sample, then keep ``duration_s`` from it."""
        if self._first.wait(first_timeout_s):
            time.sleep(max(0.0, duration_s - (time.monotonic_ns() - self._arrivals_ns[0]) / 1e9))
        end_ns = time.monotonic_ns()
        self._reader.close()
        with self._lock:
            return LowStateWindow(list(self._payloads), list(self._arrivals_ns), end_ns, source)


@dataclass
class _Decoded:
    states: list
    motor_errors: np.ndarray
    """``motorstate`` of the 29 G1 motors, one row per CRC-valid sample."""
    bad_crc: int
    malformed: list[str]


def _decode(window: LowStateWindow) -> _Decoded:
    states, errors, bad_crc, malformed = [], [], 0, []
    for payload, arrival in zip(window.payloads, window.arrivals_ns):
        try:
            state = decode_lowstate_cdr(payload, arrival, arrival)  # gaps and rate come from the arrivals
        except ValueError as exc:
            malformed.append(str(exc))
            continue
        if not state.crc_ok:
            bad_crc += 1
            continue
        states.append(state)
        errors.append(LOWSTATE_WIRE.from_cdr(payload)["motor_state"]["motorstate"][:NUM_MOTORS])
    motor_errors = np.array(errors, dtype=np.uint32).reshape(-1, NUM_MOTORS)
    return _Decoded(states, motor_errors, bad_crc, malformed)


def _joints(robot: RobotModel, indices) -> str:
    return ", ".join(robot.joint_names[i] for i in indices)


def check_stream(window: LowStateWindow, expect: LowStateExpectations) -> list[Check]:
    """Arrival, rate and gaps (a gap longer than the controller's state-age limit would fault it)."""
    count = len(window.payloads)
    if count == 0:
        return [fail("lowstate stream", f"no rt/lowstate sample on {window.source}",
                     "power the robot on and check --interface and --domain (the G1 publishes on domain 0); "
                     "a laptop needs an address on the robot's subnet")]  # fmt: skip
    arrivals = np.array([*window.arrivals_ns, window.end_ns], dtype=np.int64)
    gaps_ms = np.diff(arrivals) / 1e6
    span_s = (arrivals[-2] - arrivals[0]) / 1e9
    rate = (count - 1) / span_s if span_s > 0 else 0.0
    period_ms = 1000.0 / expect.rate_hz
    longest = float(gaps_ms.max()) if len(gaps_ms) else 0.0
    long_gaps = int((gaps_ms > 2 * period_ms).sum())
    figures = (f"{count} samples, {rate:.1f} Hz over {span_s:.2f} s (expected {expect.rate_hz:g}), "
               f"{long_gaps} gaps > {2 * period_ms:g} ms, longest {longest:.1f} ms")  # fmt: skip
    limit_ms = expect.safety.max_state_age_ms
    if longest > limit_ms:
        stopped = gaps_ms[-1] > limit_ms
        what = f"stopped {gaps_ms[-1] / 1000:.2f} s before the end of the window" if stopped else "stalled"
        return [fail("lowstate rate", f"the stream {what}: {figures}; the controller faults on state older "
                     f"than {limit_ms:g} ms (safety.max_state_age_ms)",
                     "check the robot's link (cable, switch, other traffic on the NIC) and that nothing else "
                     "loads this computer; the G1 publishes continuously while powered")]  # fmt: skip
    if abs(rate - expect.rate_hz) > RATE_TOLERANCE * expect.rate_hz:
        return [warn("lowstate rate", figures,
                     f"expected {expect.rate_hz:g} Hz (--lowstate-rate): check the link, or another robot or "
                     "simulator on the same domain")]  # fmt: skip
    return [ok("lowstate rate", figures)]


def check_crc(window: LowStateWindow, decoded: _Decoded) -> list[Check]:
    count = len(window.payloads)
    if decoded.malformed:
        return [fail("lowstate crc", f"{len(decoded.malformed)} of {count} samples malformed "
                     f"({decoded.malformed[0]})",
                     "another program publishes rt/lowstate with a different type: one robot (unitree_hg) "
                     "per DDS domain")]  # fmt: skip
    if decoded.bad_crc:
        return [fail("lowstate crc", f"{decoded.bad_crc} of {count} samples with a wrong CRC (the controller "
                     "faults after safety.max_consecutive_bad_crc in a row)",
                     "a LowState writer with another layout shares the domain (unitree_go instead of unitree_hg, "
                     "a second robot or a simulator), or the link corrupts data: one G1 per domain, check the "
                     "cable")]  # fmt: skip
    return [ok("lowstate crc", f"{count} of {count} samples CRC-valid")]


def check_mode_machine(decoded: _Decoded, expect: LowStateExpectations) -> list[Check]:
    values = sorted({s.mode_machine for s in decoded.states})
    if len(values) > 1:
        return [fail("lowstate mode_machine", f"changes within the window: {values}",
                     "more than one robot publishes on this domain: one G1 per domain")]
    value = values[0]
    if expect.mode_machine is not None and value != expect.mode_machine:
        return [fail("lowstate mode_machine", f"the robot reports mode_machine {value}, {expect.mode_machine} "
                     "was expected (--mode-machine)",
                     f"check the robot variant (G1s report 5 or 6); asap_deploy echoes the reported value, so "
                     f"pass --mode-machine {value} if this is the robot you meant")]  # fmt: skip
    if value == 0:
        return [warn("lowstate mode_machine", "reports mode_machine 0 (G1s report 5 or 6)",
                     "check the robot runs hg firmware; asap_deploy echoes the reported value in every LowCmd")]
    expected = f" = --mode-machine {expect.mode_machine}" if expect.mode_machine is not None else ""
    return [ok("lowstate mode_machine", f"{value}{expected} (asap_deploy echoes it in every LowCmd)")]


def check_imu(decoded: _Decoded) -> list[Check]:
    quats = np.array([s.quat_wxyz for s in decoded.states])
    norms = np.linalg.norm(quats, axis=1)
    acc = float(np.median(np.linalg.norm([s.acc for s in decoded.states], axis=1)))
    worst = float(norms[np.argmax(np.abs(norms - 1.0))])
    if not np.isfinite(norms).all() or abs(worst - 1.0) > QUATERNION_NORM_TOLERANCE:
        return [fail("lowstate imu", f"IMU quaternion norm {worst:.3f}, not a unit quaternion (the controller "
                     "faults on it)", "power-cycle the robot; if it stays, the IMU needs service")]  # fmt: skip
    if not abs(acc - GRAVITY) <= GRAVITY_TOLERANCE:
        return [fail("lowstate imu", f"|accelerometer| median {acc:.2f} m/s^2, gravity is {GRAVITY} "
                     f"(+-{GRAVITY_TOLERANCE})",
                     "keep the robot still (hanging) during the check; if it stays, power-cycle the robot")]
    return [ok("lowstate imu", f"|acc| {acc:.2f} m/s^2, quaternion norm {worst:.4f}")]


def check_joints(decoded: _Decoded, expect: LowStateExpectations) -> list[Check]:
    robot, margin = expect.robot, expect.safety.position_margin_rad
    q = decoded.states[-1].q
    beyond = np.flatnonzero((q < robot.q_lower - margin) | (q > robot.q_upper + margin))
    outside = np.flatnonzero((q < robot.q_lower) | (q > robot.q_upper))
    if len(beyond):
        detail = "; ".join(f"{robot.joint_names[i]} {q[i]:+.3f} rad not in [{robot.q_lower[i]:+.3f}, "
                           f"{robot.q_upper[i]:+.3f}]" for i in beyond)  # fmt: skip
        return [fail("lowstate joints", f"beyond their limits by more than {margin:g} rad "
                     f"(safety.position_margin_rad; the controller faults): {detail}",
                     "move these joints back within range by hand with the motors off (robot hanging), "
                     f"or check {robot.source} matches this robot")]  # fmt: skip
    if len(outside):
        return [warn("lowstate joints", f"slightly outside their limits: {_joints(robot, outside)}",
                     "move them back within range by hand before standing up")]
    return [ok("lowstate joints", f"all {NUM_MOTORS} within their limits ({robot.source})")]


def check_motor_errors(decoded: _Decoded, expect: LowStateExpectations) -> list[Check]:
    flagged = np.flatnonzero(decoded.motor_errors.any(axis=0))
    if len(flagged):
        codes = decoded.motor_errors[:, flagged]
        detail = "; ".join(f"{expect.robot.joint_names[i]} (motor {i}) 0x{int(c[c != 0][-1]):08x}"
                           for i, c in zip(flagged, codes.T))  # fmt: skip
        return [fail("lowstate motor errors", f"{len(flagged)} motors report an error state: {detail}",
                     "power-cycle the robot with it hanging; if a motor still reports an error, look the code up "
                     "in Unitree's motor error list and have that joint checked")]  # fmt: skip
    return [ok("lowstate motor errors", f"all {NUM_MOTORS} motors report error state 0")]


def check_temperatures(decoded: _Decoded, expect: LowStateExpectations) -> list[Check]:
    hottest = np.max([s.temperature for s in decoded.states], axis=0)
    limit = expect.safety.max_start_temperature_c
    hot = np.flatnonzero(hottest > limit)
    if len(hot):
        detail = ", ".join(f"{expect.robot.joint_names[i]} {hottest[i]:.0f} C" for i in hot)
        return [fail("lowstate temperature", f"above the start limit {limit:g} C "
                     f"(safety.max_start_temperature_c; a motion start is refused): {detail}",
                     "let the motors cool with the robot hanging and the motors off, then run doctor again")]
    i = int(np.argmax(hottest))
    return [ok("lowstate temperature",
               f"hottest {expect.robot.joint_names[i]} {hottest[i]:.0f} C (start limit {limit:g} C)")]


def analyse_lowstate(window: LowStateWindow, expect: LowStateExpectations) -> list[Check]:
    """Every LowState check of one window; content checks read only the CRC-valid samples."""
    checks = check_stream(window, expect)
    if not window.payloads:
        return checks
    decoded = _decode(window)
    checks += check_crc(window, decoded)
    if not decoded.states:
        return checks
    checks += check_mode_machine(decoded, expect)
    checks += check_imu(decoded)
    checks += check_joints(decoded, expect)
    checks += check_motor_errors(decoded, expect)
    checks += check_temperatures(decoded, expect)
    return checks
