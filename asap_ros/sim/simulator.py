"""The simulated G1 on DDS: a physics thread on absolute deadlines plus the hg bridge.

Topics: ``rt/lowstate`` out (raw XCDR1 LowState_ with CRC), ``rt/lowcmd`` in (raw, checked by
:class:`~asap_ros.sim.bridge.LowCmdIntake`), ``rt/asap_sim/ground_truth`` out (one per
LowState), ``rt/asap_sim/control`` in; optionally ``rt/mocap/pose`` (ROS 2's ``mocap/pose``).

In-process use::

    with Simulator(load_sim_config(), domain=7) as sim:
        ...
        sim.request(BAND_RELEASE)
    print(sim.stats())
"""

from __future__ import annotations

import collections
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from cyclonedds.pub import DataWriter
from cyclonedds.topic import Topic

from asap_ros.config.assets import asset_path
from asap_ros.config.paths import config_file
from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import AsapError
from asap_ros.core.state import NUM_MOTORS
from asap_ros.g1.layout import LOWCMD_TOPIC, LOWSTATE_TOPIC
from asap_ros.runtime.dds import RawReader, RawWriter, close_entity, init_channels, participant
from asap_ros.runtime.scheduling import on_grid, run_realtime
from asap_ros.sim.bridge import LowCmdIntake, LowStateEncoder, RobotReading
from asap_ros.sim.config import SimConfig
from asap_ros.sim.control import CONTROL_QOS
from asap_ros.sim.dds_types import (
    BAND_ATTACH,
    BAND_LOWER,
    BAND_RAISE,
    BAND_RELEASE,
    CONTROL_ACTIONS,
    CONTROL_TOPIC,
    GROUND_TRUTH_TOPIC,
    MOTOR_ACTIONS,
    MOTOR_ERROR,
    MOTOR_TEMPERATURE,
    MOTOR_TEMPERATURE_RELEASE,
    REMOTE_BUTTONS,
    GroundTruth_,
    SimControl_,
)
from asap_ros.sim.mocap_stream import MocapStream
from asap_ros.sim.motors import CommandGate, MotorHealthOverrides, MotorModel, ThermalModel
from asap_ros.sim.physics import G1Physics
from asap_ros.sim.profile import load_profile
from asap_ros.sim.stalls import STALL_AFTER_NS, StallMeter

MAX_LAG_S = 0.05
"""Behind the deadline grid by more than this: restart the grid (counted as a resync)."""
VIEWER_PERIOD_S = 1 / 60


def _config_path(name: str) -> Path:
    return Path(name) if "/" in name else config_file(name)


def _check_motor_action(action: str, value: float, motor: int) -> None:
    """AsapError naming the action unless ``motor`` and ``value`` fit it."""
    lowest = 0 if action == MOTOR_ERROR else -1
    if not lowest <= motor < NUM_MOTORS:
        allowed = "0.." if action == MOTOR_ERROR else "-1 (all) or 0.."
        raise AsapError(f"simulator action {action}: motor must be {allowed}{NUM_MOTORS - 1}, got {motor!r}")
    if action == MOTOR_ERROR and not (math.isfinite(value) and value == int(value) and 0 <= value < 1 << 32):
        raise AsapError(f"simulator action {action}: value must be error bits 0..2^32-1, got {value!r}")
    if action == MOTOR_TEMPERATURE and not -40.0 <= value <= 200.0:
        raise AsapError(f"simulator action {action}: value must be a temperature -40..200 C, got {value!r}")


class Simulator:
    """A simulated G1 serving the unitree hg topics on one DDS domain."""

    def __init__(
        self,
        config: SimConfig,
        domain: int,
        interface: str = "lo",
        viewer: bool = False,
        assets_dir: str | Path | None = None,
        realtime_priority: int = 0,
        lowcmd_priority: int | None = None,
    ):
        """``realtime_priority`` > 0: the physics thread under SCHED_FIFO, the mocap stream's thread
        one below (``scheduling_note`` says why not, when refused); ``lowcmd_priority``: the
        rt/lowcmd reader's (None: ``realtime_priority``; 0: normal scheduling)."""
        self.config = config
        self.domain = domain
        self.interface = interface
        robot = load_robot_model(_config_path(config.robot))
        self.profile = load_profile(config.profile, robot.joint_names)
        self.physics = G1Physics(
            asset_path(config.model, assets_dir), robot.joint_names, 1.0 / config.physics_rate_hz,
            robot.default_q, self.profile, config.band, config.source,
        )
        self.motors = MotorModel(self.physics.effort_limit, self.profile.torque_scale)
        self.thermal = ThermalModel(self.profile.thermal, self.physics.effort_limit)
        self.motor_health = MotorHealthOverrides(NUM_MOTORS)
        self.gate = CommandGate(self.profile.actuation_delay_s, config.command_timeout_s)
        seeds = [np.random.default_rng(s) for s in np.random.SeedSequence(self.profile.seed).spawn(3)]
        self.intake = LowCmdIntake(self.gate, config.mode_machine, self.profile.command_drop_probability, seeds[0])
        self.lowstate = LowStateEncoder(config.mode_machine, self.profile.sensor_noise, seeds[1])
        self.mocap = None
        if config.mocap.rate_hz > 0:
            # one below the physics thread, as the deploy node's other Python threads sit below its loop
            self.mocap = MocapStream(config.mocap, self._newest_pose, seeds[2],
                                     realtime_priority=max(realtime_priority - 1, 0))
        self._viewer_wanted = viewer
        self._priority = realtime_priority
        self._lowcmd_priority = realtime_priority if lowcmd_priority is None else lowcmd_priority
        self.scheduling_note: str | None = None
        self._viewer: Any = None
        self._lowstate_writer: RawWriter | None = None
        self._gt_writer: DataWriter | None = None
        self._lowcmd_reader: RawReader | None = None
        self._control_reader: RawReader | None = None
        self._requests: collections.deque[tuple[str, float, int]] = collections.deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pose = (self.physics.pelvis_pos(), self.physics.pelvis_quat_wxyz())
        self._step_cost_ns = np.zeros(1 << 16, dtype=np.int64)
        self.steps = 0
        self.resyncs = 0
        self.lowstates_published = 0
        self.lowstate_gaps = 0
        """Intervals between consecutive LowState writes longer than twice the nominal period."""
        self._max_gap_ns = 0
        self._last_publish_ns = 0
        self.stalls = StallMeter(after_ns=max(STALL_AFTER_NS, round(2e9 / config.lowstate_rate_hz)))
        """Gaps between LowState writes longer than one control period (two LowState periods for a
        stream slower than 100 Hz), each attributed (written on stderr as it ends, and in :meth:`stats`)."""
        self.controls_applied = 0
        self.controls_rejected = 0
        self.last_control_problem = ""
        self._started_ns = 0
        self._stopped_ns = 0

    # --- lifecycle ------------------------------------------------------------------------
    def start(self, lowstate_readers: int = 0, mocap_readers: int = 0, wait_s: float = 0.0) -> None:
        """Open the DDS endpoints and start the physics: once rt/lowstate has ``lowstate_readers``
        matched readers and mocap/pose ``mocap_readers`` subscriptions, or after ``wait_s`` (the
        shortfall then goes to stderr)."""
        if self._thread is not None:
            raise AsapError("simulator already started")
        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_

        if self._viewer_wanted:
            self._viewer = self._launch_viewer()
        init_channels(self.domain, self.interface, receive_priority=self._priority)
        dp = participant()
        self._lowstate_writer = RawWriter(LOWSTATE_TOPIC, LowState_)
        self._gt_writer = DataWriter(dp, Topic(dp, GROUND_TRUTH_TOPIC, GroundTruth_))
        self._lowcmd_reader = RawReader(LOWCMD_TOPIC, LowCmd_, self.intake.on_payload,
                                      realtime_priority=self._lowcmd_priority)
        self._control_reader = RawReader(CONTROL_TOPIC, SimControl_, self._on_control, qos=CONTROL_QOS)
        if self.mocap is not None:
            self.mocap.open()
        if lowstate_readers or mocap_readers:
            self._wait_for_readers(lowstate_readers, mocap_readers, wait_s)
        if self.mocap is not None:
            self.mocap.start()
        self._thread = threading.Thread(target=self._run, name="asap-sim-physics", daemon=True)
        self._thread.start()

    def _wait_for_readers(self, wanted: int, mocap_wanted: int, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            readers = self._lowstate_writer.matched()
            mocap = self.mocap.subscribers() if self.mocap is not None else 0
            if readers >= wanted and mocap >= mocap_wanted:
                return
            if time.monotonic() > deadline:
                print(f"asap_sim: starting with {readers} of {wanted} rt/lowstate readers and {mocap} of "
                      f"{mocap_wanted} mocap subscribers after {wait_s:g} s", file=sys.stderr, flush=True)
                return
            time.sleep(0.01)

    def _launch_viewer(self) -> Any:
        """MuJoCo's passive viewer; refused up front without a display (GLFW would exit the process)."""
        if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            raise AsapError("the MuJoCo viewer needs a display: neither DISPLAY nor WAYLAND_DISPLAY is set")
        import mujoco.viewer

        return mujoco.viewer.launch_passive(self.physics.model, self.physics.data)

    def stop(self) -> None:
        """Stop the physics thread (if started) and close the DDS endpoints (idempotent)."""
        if self.mocap is not None:
            self.mocap.stop()
        if self._thread is not None:
            self._stop.set()
            self._thread.join(5.0)
            if self._viewer is not None:
                self._viewer.close()
                self._viewer = None
        for endpoint in (self._lowcmd_reader, self._control_reader, self._lowstate_writer):
            if endpoint is not None:
                endpoint.close()
        if self._gt_writer is not None:
            close_entity(self._gt_writer)
        if self._thread is None or not self._thread.is_alive():  # its files are the thread's to read till then
            self.stalls.close()

    def __enter__(self) -> Simulator:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # --- control --------------------------------------------------------------------------
    def request(self, action: str, value: float = 0.0, motor: int = -1) -> None:
        """Queue a band, remote or motor-health action (see :mod:`asap_ros.sim.dds_types`) for the
        physics thread; ``motor`` is the motor of a ``motor_*`` action."""
        if action not in CONTROL_ACTIONS:
            raise AsapError(f"unknown simulator action {action!r} (known: {', '.join(CONTROL_ACTIONS)})")
        if action in MOTOR_ACTIONS:
            _check_motor_action(action, value, motor)
        elif action == REMOTE_BUTTONS:
            if value not in range(1 << 16):
                raise AsapError(f"simulator action {action}: value must be a 16-bit button field, got {value!r}")
        elif not math.isfinite(value) or value < 0:
            raise AsapError(f"simulator action {action}: value must be a finite length >= 0 m, got {value!r}")
        self._requests.append((action, value, motor))

    def _on_control(self, payload: bytes, _stamp_ns: int, _writer: int) -> None:
        """RawReader handler (its own thread): one control request."""
        try:
            sample = SimControl_.deserialize(payload)
            self.request(sample.action, sample.value, sample.motor)
        except Exception as exc:  # malformed sample or refused request: counted, never applied
            self.controls_rejected += 1
            self.last_control_problem = str(exc)

    def _apply_requests(self) -> None:
        band, step, health = self.physics.band, self.config.band.lower_step_m, self.motor_health
        while self._requests:
            action, value, motor = self._requests.popleft()
            motors = slice(None) if motor == -1 else motor
            if action == BAND_LOWER:
                band.lower(value or step)
            elif action == BAND_RAISE:
                band.lower(-(value or step))
            elif action == BAND_RELEASE:
                band.enabled = False
            elif action == BAND_ATTACH:
                self.physics.attach_band()
            elif action == REMOTE_BUTTONS:
                self.lowstate.record["wireless_remote"][2:4] = (int(value) & 0xFF, int(value) >> 8)
            elif action == MOTOR_ERROR:
                health.error[motor] = int(value)
            elif action == MOTOR_TEMPERATURE:
                health.set_temperature(motors, value)
            elif action == MOTOR_TEMPERATURE_RELEASE:
                health.release_temperature(motors)
            self.controls_applied += 1

    # --- physics thread -------------------------------------------------------------------
    def _newest_pose(self) -> tuple[np.ndarray, np.ndarray]:
        return self._pose

    def step_physics(self, now_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """One physics step as the G1's motors act: the command in force at ``now_ns`` (delay,
        timeout-limp), motor PD, physics, heating. Returns the torques and the enabled motors."""
        command = self.gate.update(now_ns)
        tau = self.motors.torque(command, self.physics.q(), self.physics.dq())
        self.physics.step(tau)
        self.thermal.update(tau, self.physics.timestep)
        enabled = command.enabled if command is not None else np.zeros(NUM_MOTORS, dtype=bool)
        return tau, enabled

    def reading(self, tau: np.ndarray, enabled: np.ndarray) -> RobotReading:
        """What the robot's sensors see now (true values; the LowState encoder adds noise)."""
        physics = self.physics
        return RobotReading(
            q=physics.q(), dq=physics.dq(), ddq=physics.ddq(), tau=tau,
            temperature_c=self.motor_health.temperature(self.thermal.temperature_c), enabled=enabled,
            quat_wxyz=physics.pelvis_quat_wxyz(), gyro=physics.gyro(), acc=physics.accelerometer(),
            imu_temperature_c=self.thermal.ambient_c, motor_error=self.motor_health.error.copy(),
        )  # fmt: skip

    def _run(self) -> None:
        self.scheduling_note = run_realtime(self._priority)
        physics = self.physics
        dt = physics.timestep
        period_ns = int(round(dt * 1e9))
        publish_period_ns = period_ns * self.config.lowstate_decimation
        lead_ns = int(round(self.config.lowstate_lead_ms * 1e6))
        # steps on the monotonic clock's grid of the physics period, those that publish lead_ns before
        # multiples of the LowState period: the control loop's deadlines (multiples of 20 ms) find a
        # LowState just written, and the simulator's work (its CPU, on a shared computer, the robot
        # board's on a robot) keeps off the first period - lead of each control step
        phase_ns = -lead_ns % period_ns
        max_lag_ns = int(MAX_LAG_S * 1e9)
        viewer_every = max(1, round(VIEWER_PERIOD_S / dt))
        self._started_ns = time.monotonic_ns()
        deadline = on_grid(self._started_ns, period_ns, phase_ns)
        while not self._stop.is_set():
            now = time.monotonic_ns()
            if deadline > now:
                time.sleep((deadline - now) / 1e9)
            began = time.perf_counter_ns()
            self._apply_requests()
            tau, enabled = self.step_physics(time.monotonic_ns())
            self.steps += 1
            self._pose = (physics.pelvis_pos(), physics.pelvis_quat_wxyz())
            if (deadline + lead_ns) % publish_period_ns == 0:
                self._publish(tau, enabled)
            if self._viewer is not None and self.steps % viewer_every == 0:
                self._viewer.sync()
            self._step_cost_ns[(self.steps - 1) % len(self._step_cost_ns)] = time.perf_counter_ns() - began
            deadline += period_ns
            now = time.monotonic_ns()
            if now - deadline > max_lag_ns:  # too far behind to catch up: the grid's next instant
                self.resyncs += 1
                deadline = on_grid(now, period_ns, phase_ns)
        self._stopped_ns = time.monotonic_ns()

    def _publish(self, tau: np.ndarray, enabled: np.ndarray) -> None:
        physics = self.physics
        tick = round(physics.time * 1000)  # the G1's tick counts milliseconds
        reading = self.reading(tau, enabled)
        q = reading.q
        payload = self.lowstate.encode(tick, reading)
        stamp_ns = time.time_ns()
        self._lowstate_writer.write(payload)
        self.lowstates_published += 1
        now_ns = time.monotonic_ns()
        gap_ns = now_ns - (self._last_publish_ns or now_ns)
        self.lowstate_gaps += gap_ns > 2e9 / self.config.lowstate_rate_hz
        self._max_gap_ns = max(self._max_gap_ns, gap_ns)
        self._last_publish_ns = now_ns
        stall = self.stalls.mark(now_ns, tick)
        if stall is not None:
            print(f"asap_sim: {stall.line()}", file=sys.stderr, flush=True)
        self._gt_writer.write(
            GroundTruth_(
                tick=tick & 0xFFFFFFFF, stamp_ns=stamp_ns, sim_time=physics.time,
                pelvis_pos=self._pose[0].tolist(), pelvis_quat_wxyz=self._pose[1].tolist(),
                q=q.tolist(), tau=tau.tolist(), band_enabled=physics.band.enabled,
            )
        )

    # --- statistics -----------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counters and timing (JSON-serialisable)."""
        end = self._stopped_ns or time.monotonic_ns()
        wall_s = (end - self._started_ns) / 1e9 if self._started_ns else 0.0
        costs = self._step_cost_ns[: min(self.steps, len(self._step_cost_ns))]
        p50, p99, pmax = (np.percentile(costs, [50, 99, 100]) / 1e3).tolist() if len(costs) else (0.0, 0.0, 0.0)
        intake, gate = self.intake.counters, self.gate
        return {
            "profile": self.profile.name,
            "physics_rate_hz": self.config.physics_rate_hz,
            "lowstate_lead_ms": self.config.lowstate_lead_ms,
            "steps": self.steps,
            "sim_time_s": self.physics.time,
            "wall_time_s": wall_s,
            "real_time_factor": self.physics.time / wall_s if wall_s else 0.0,
            "step_cost_us": {"p50": p50, "p99": p99, "max": pmax},
            "resyncs": self.resyncs,
            "realtime_priority": self._priority,
            "lowcmd_priority": self._lowcmd_priority,
            "scheduling_note": self.scheduling_note,
            "lowstates_published": self.lowstates_published,
            "lowstate_gaps": {"over_2_periods": self.lowstate_gaps, "max_ms": self._max_gap_ns / 1e6},
            "stalls": self.stalls.stats(),
            "commands": {
                "received": intake.received,
                "accepted": intake.accepted,
                "applied": gate.applied,
                "rejected_bad_crc": intake.bad_crc,
                "malformed": intake.malformed,
                "wrong_mode_machine": intake.wrong_mode_machine,
                "dropped_by_profile": intake.dropped_by_profile,
                "last_problem": intake.last_problem,
                "limp_events": gate.limp_events,
                "last_limp_after_s": None if math.isnan(gate.last_limp_after_s) else gate.last_limp_after_s,
            },
            "control": {"applied": self.controls_applied, "rejected": self.controls_rejected,
                        "last_problem": self.last_control_problem},
            "band": {"enabled": self.physics.band.enabled, "length_m": self.physics.band.length},
            "mocap": self.mocap.stats() if self.mocap is not None else None,
        }
