"""The real-time control thread with the real Controller, CR7 actor and G1 wire format.

The robot side is a feeder thread producing raw ``rt/lowstate`` samples with the simulator's
own encoder (G1 C layout, XCDR1, CRC) at 500 Hz and a robot that follows its targets; the
loop's ``write_lowcmd`` receives raw ``rt/lowcmd`` bytes, decoded here with the SDK's own
deserialiser and CRC check. DDS transport itself is exercised by the sim and ROS e2e tests.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time

import numpy as np
import pytest
from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_

from asap_ros.config.controller import load_controller_config
from asap_ros.config.paths import policies_dir
from asap_ros.config.robot import load_robot_model
from asap_ros.core.controller import Controller, Mode
from asap_ros.core.policy import PolicyRunner
from asap_ros.core.state import NUM_MOTORS
from asap_ros.core.state_machine import EStop, Stand, Start
from asap_ros.g1.layout import LOWCMD_WIRE
from asap_ros.g1.sdk import lowcmd_crc_ok
from asap_ros.runtime.control_loop import ControlLoop, StepRecord, existing_cpu
from asap_ros.runtime.policies import build_controller, load_policy_runner
from asap_ros.sim.bridge import LowStateEncoder, RobotReading
from asap_ros.sim.profile import SensorNoise

MODE_MACHINE = 6


class FollowingRobot:
    """Feeds raw LowState samples at 500 Hz; its joints jump to the last commanded targets."""

    def __init__(self, put, start_q: np.ndarray):
        self._put = put
        self._encoder = LowStateEncoder(MODE_MACHINE, SensorNoise(), np.random.default_rng(0))
        self.q = start_q.copy()
        self.corrupt_next = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def follow(self, payload: bytes) -> None:
        motors = LOWCMD_WIRE.from_cdr(payload)["motor_cmd"][:NUM_MOTORS]
        if motors["kp"].max() > 0:
            self.q = motors["q"].astype(np.float64)

    def _run(self) -> None:
        tick = 0
        while not self._stop.is_set():
            zeros = np.zeros(NUM_MOTORS)
            reading = RobotReading(
                q=self.q, dq=zeros, ddq=zeros, tau=zeros, temperature_c=np.full(NUM_MOTORS, 40.0),
                enabled=np.ones(NUM_MOTORS, dtype=bool), quat_wxyz=np.array([1.0, 0, 0, 0]),
                gyro=np.zeros(3), acc=np.array([0, 0, 9.81]), imu_temperature_c=40.0,
            )
            payload = self._encoder.encode(tick, reading)
            corrupt, self.corrupt_next = self.corrupt_next, False
            self._put(payload[:-8] if corrupt else payload, time.time_ns())
            tick += 1
            time.sleep(0.025 if corrupt else 0.002)  # a truncated sample stays newest for one step

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class SdkDecodedWrites:
    """The LowCmd payloads written, read back through the SDK's own deserialiser (lazily, so
    the test's write callback stays cheap on the control thread)."""

    def __init__(self) -> None:
        self.raw: list[tuple[int, bytes]] = []

    def __len__(self) -> int:
        return len(self.raw)

    def __eq__(self, other: object) -> bool:
        return list(self) == other

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [(t, LowCmd_.deserialize(p)) for t, p in self.raw[index]]
        t, p = self.raw[index]
        return t, LowCmd_.deserialize(p)

    def __iter__(self):
        return iter(self[:])


@pytest.fixture
def rig(request):
    """Loop, following robot, written LowCmds, step records and config; ``request.param``: the
    control period in seconds (default 20 ms)."""
    period_s = getattr(request, "param", 0.02)
    robot = load_robot_model()
    config = load_controller_config()
    # this test is about the loop's wiring: safety margins wide enough that a starved feeder
    # thread on a loaded 2-core machine does not fault (the thresholds have their own tests)
    safety = dataclasses.replace(config.safety, max_state_age_ms=1000, max_consecutive_late_steps=1000)
    config = dataclasses.replace(config, stand_up_duration_s=0.3, safety=safety)
    runner = load_policy_runner(policies_dir() / "CR7_level1.yaml", robot)
    controller = build_controller(robot, {"CR7_level1": runner}, config)
    written = SdkDecodedWrites()
    holder: dict = {}

    def write(payload: bytes) -> None:
        written.raw.append((time.monotonic_ns(), payload))
        holder["robot"].follow(payload)

    loop = ControlLoop(controller, write, period_s=period_s)
    holder["robot"] = FollowingRobot(loop.states.put, np.zeros(NUM_MOTORS))
    records: list[StepRecord] = []
    loop.add_sink(records.append)
    yield loop, holder["robot"], written, records, config
    loop.stop()
    holder["robot"].stop()


def _wait(predicate, loop: ControlLoop, timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        c = loop.controller
        assert time.monotonic() < end, f"not reached: mode {c.mode}, fault {c.fault_reason}, {loop.stats.summary()}"
        time.sleep(0.005)


def test_loop_runs_controller_on_the_wire_format(rig) -> None:
    loop, robot, written, records, config = rig
    loop.start()
    time.sleep(0.1)
    assert written == [], "a LowCmd was sent before any LowState (mode_machine unknown)"
    robot.start()
    _wait(lambda: len(written) >= 3, loop)
    assert all(lowcmd_crc_ok(m) and m.mode_machine == MODE_MACHINE for _, m in written)
    loop.request(Stand())
    _wait(lambda: loop.controller.mode is Mode.HOLD, loop)
    _, last = written[-1]
    np.testing.assert_allclose([m.kp for m in last.motor_cmd[:NUM_MOTORS]], load_robot_model().kp, rtol=1e-6)
    _wait(lambda: len(records) >= len(written) - 1, loop)
    stepped = [r for r in records if r.lowstate_stamp_ns]
    assert stepped and all(r.latency_ns > 0 and r.compute_ns > 0 for r in stepped)
    assert all(r.stamp_ns >= r.lowstate_stamp_ns for r in stepped)
    summary = loop.stats.summary()
    assert summary["steps"] >= len(stepped) - 1 and summary["latency_p99_us"] > 0


@pytest.mark.parametrize("rig", [0.1], indirect=True)
def test_estop_is_written_before_the_next_deadline(rig) -> None:
    """EStop wakes the loop: the damping command is written before the grid's next deadline,
    not on it. The loop runs at 10 Hz here, so that deadline is far from the e-stop. It is known
    from the last grid write before the e-stop: that step's deadline lay at most the state wait
    plus its compute time before the write, and the next deadline is one period later."""
    loop, robot, written, _, config = rig
    period_ns = round(0.1 * 1e9)
    robot.start()
    loop.start()
    _wait(lambda: len(written) >= 2, loop)
    loop.request(Stand())
    _wait(lambda: loop.controller.mode is Mode.HOLD, loop)
    count = len(written)
    _wait(lambda: len(written) > count, loop)  # a grid write just happened
    last_grid_write_ns = written.raw[-1][0]
    stats = loop.stats
    slowest_step_ns = int(stats.compute_ns[: min(stats.count, len(stats.compute_ns))].max())
    next_deadline_ns = last_grid_write_ns - round(0.004 * 1e9) - slowest_step_ns + period_ns  # state_wait_s 4 ms
    requested_ns = time.monotonic_ns()
    loop.request(EStop("test"))
    _wait(lambda: any(t > requested_ns for t, _ in written.raw), loop)
    first_ns, first = next((t, m) for t, m in written if t > requested_ns)
    print(f"\n  e-stop -> damping write {(first_ns - requested_ns) / 1e6:.2f} ms, "
          f"{(next_deadline_ns - first_ns) / 1e6:.1f} ms before the next deadline")
    assert requested_ns < next_deadline_ns, "the e-stop came too late in the period to tell"
    assert first_ns < next_deadline_ns, "the damping command waited for the grid"
    assert max(c.kp for c in first.motor_cmd[:NUM_MOTORS]) == 0
    np.testing.assert_allclose([c.kd for c in first.motor_cmd[:NUM_MOTORS]], config.damping_kd, rtol=1e-6)
    assert loop.controller.mode is Mode.DAMPING and loop.controller.fault_reason == "e-stop: test"


def test_malformed_sample_is_counted_and_never_used(rig) -> None:
    loop, robot, written, _, _ = rig
    robot.start()
    loop.start()
    _wait(lambda: len(written) >= 2, loop)
    loop.request(Stand())
    _wait(lambda: loop.controller.mode is Mode.HOLD, loop)
    robot.corrupt_next = True
    _wait(lambda: loop.decode_errors >= 1, loop)
    time.sleep(0.1)
    assert loop.controller.mode is Mode.HOLD, loop.controller.fault_reason


def test_existing_cpu_names_the_cpus_of_the_machine() -> None:
    count = os.cpu_count()
    assert existing_cpu(count - 1) == count - 1
    for cpu in (count, -1):
        with pytest.raises(ValueError, match=re.escape(f"CPU {cpu} does not exist (this machine has CPUs 0-{count - 1})")):
            existing_cpu(cpu)


def test_control_thread_runs_on_its_cpus_and_the_process_keeps_its_own(rig) -> None:
    loop, robot, _, _, _ = rig
    robot.start()  # the rig's teardown stops it; the rig's own loop stays idle
    before = os.sched_getaffinity(0)
    cpu = max(before)
    pinned = ControlLoop(loop.controller, lambda payload: None, cpus=frozenset({cpu}))
    pinned.start()
    try:
        control = next(t for t in threading.enumerate() if t.name == "asap-control" and t.is_alive())
        end = time.monotonic() + 5.0
        while os.sched_getaffinity(control.native_id) != {cpu} and time.monotonic() < end:
            time.sleep(0.01)
        assert os.sched_getaffinity(control.native_id) == {cpu}
        assert os.sched_getaffinity(0) == before
        assert pinned.scheduling_note is None
    finally:
        pinned.stop()


def test_a_cpu_the_thread_cannot_use_leaves_it_unpinned_with_a_note(rig) -> None:
    loop, robot, _, _, _ = rig
    robot.start()
    unpinnable = ControlLoop(loop.controller, lambda payload: None, cpus=frozenset({4095}))
    unpinnable.start()
    try:
        assert "cannot pin the control thread to CPU [4095]" in unpinnable.scheduling_note
        control = next(t for t in threading.enumerate() if t.name == "asap-control")
        assert control.is_alive()
    finally:
        unpinnable.stop()


class FailingActor:
    """The real actor, whose output turns NaN from its ``after``-th call on (a fault the check catches)."""

    def __init__(self, actor, after: int):
        self._actor, self._after, self.calls = actor, after, 0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.calls += 1
        action = self._actor(obs)
        return action * np.nan if self.calls > self._after else action


def test_steps_carry_their_motion_and_mark_the_fault(rig) -> None:
    """The label is taken on the control thread: the last step of a motion (recorded after the
    switch to HOLD) and the faulted step (in DAMPING) still name their motion."""
    loop, robot, written, records, config = rig
    runner = loop.controller.policies["CR7_level1"]
    spec = dataclasses.replace(runner.spec, clip_duration_s=8 * runner.spec.control_dt, prepare_blend_s=0.1,
                               prepare_hold_s=0.05)  # fmt: skip
    short = PolicyRunner(spec, runner.robot, runner.actor)
    failing = PolicyRunner(spec, runner.robot, FailingActor(runner.actor, after=3))
    controller = Controller(runner.robot, {"short": short, "failing": failing}, config,
                            hold_policy=loop.controller.hold_policy)

    def write(payload: bytes) -> None:  # as the rig's loop writes: the robot follows
        written.raw.append((time.monotonic_ns(), payload))
        robot.follow(payload)

    loop = ControlLoop(controller, write, states=loop.states)
    loop.add_sink(records.append)
    robot.start()
    loop.start()
    try:
        _wait(lambda: len(records) >= 2, loop)
        loop.request(Stand())
        _wait(lambda: controller.mode is Mode.HOLD, loop)
        loop.request(Start("short"))
        _wait(lambda: controller.mode is Mode.TRACKING, loop)
        _wait(lambda: controller.mode is Mode.HOLD, loop)
        loop.request(Start("failing"))
        _wait(lambda: controller.mode is Mode.DAMPING, loop)
        _wait(lambda: records[-1].output.mode is Mode.DAMPING, loop)
    finally:
        loop.stop()
    acted = [r for r in records if r.output.policy is not None]
    first_run = [r for r in acted if r.output.motion == "short"]
    assert [r.output.policy.tick for r in first_run] == list(range(7))  # phase 1 after 8 control steps
    assert first_run[-1].output.mode is Mode.HOLD  # recorded after the switch, still labelled
    assert {r.output.motion for r in acted} == {"short", "failing"}
    (latched,) = [r for r in records if r.fault_latched]
    assert latched.output.motion == "failing" and latched.output.mode is Mode.DAMPING
    assert latched.output.policy is not None and np.isnan(latched.output.policy.raw_action).all()
    assert latched.output.command.kp.max() == 0  # the damping command went out on that step
