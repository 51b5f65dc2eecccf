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
from asap_ros.core.controller import Controller, ControllerConfig, Mode
from asap_ros.core.errors import ConfigError, RejectedRequest
from asap_ros.core.lease import Grant, Supervision, WriteLease, Writer
from asap_ros.core.policy import PolicyRunner
from asap_ros.core.state import NUM_MOTORS
from asap_ros.core.state_machine import EStop, Reset, Stand, Start, Stop
from asap_ros.g1.layout import LOWCMD_WIRE
from asap_ros.g1.sdk import lowcmd_crc_ok
from asap_ros.runtime.clock import Clock
from asap_ros.runtime.control_loop import ControlLoop, StepRecord, _Timing, check_control_rate, existing_cpu
from asap_ros.runtime.fault_injection import FaultInjection, parse_faults
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
            self._put(payload[:-8] if corrupt else payload)
            tick += 1
            time.sleep(0.025 if corrupt else 0.002)  # a truncated sample stays newest for one step

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
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


@dataclasses.dataclass
class Rig:
    loop: ControlLoop
    robot: FollowingRobot
    written: SdkDecodedWrites
    records: list[StepRecord]
    config: ControllerConfig


@pytest.fixture(scope="module")
def cr7() -> PolicyRunner:
    return load_policy_runner(policies_dir() / "CR7_level1.yaml", load_robot_model())


@pytest.fixture
def make_rig(cr7):
    """``make_rig(**loop_options)``: the real Controller and CR7 actor in a ControlLoop fed by a
    FollowingRobot; ``fail_write`` (a callable given the write count) makes a write raise,
    ``stall_write`` (the same) makes it take that many seconds before it goes out;
    ``actors=False``: no actors at all (PD hold), so the loop may run at any rate."""
    made: list[Rig] = []

    def make(fail_write=None, actors: bool = True, stall_write=None, **options) -> Rig:
        robot = load_robot_model()
        config = load_controller_config()
        # this test is about the loop's wiring: safety margins wide enough that a starved feeder
        # thread on a loaded 2-core machine does not fault (the thresholds have their own tests)
        safety = dataclasses.replace(config.safety, max_state_age_ms=1000, max_consecutive_late_steps=1000)
        config = dataclasses.replace(config, stand_up_duration_s=0.3, safety=safety)
        if actors:
            controller = build_controller(robot, {"CR7_level1": PolicyRunner(cr7.spec, cr7.robot, cr7.actor)}, config)
        else:
            controller = Controller(robot, {}, dataclasses.replace(config, hold_policy=None))
        written = SdkDecodedWrites()
        holder: dict = {}

        def write(payload: bytes) -> None:
            if fail_write is not None and fail_write(len(written)):
                raise RuntimeError("rt/lowcmd writer gone")
            if stall_write is not None:
                time.sleep(stall_write(len(written)))  # the process stopped inside the DDS write
            written.raw.append((time.monotonic_ns(), payload))
            holder["robot"].follow(payload)

        loop = ControlLoop(controller, write, **options)
        holder["robot"] = FollowingRobot(loop.states.put, np.zeros(NUM_MOTORS))
        records: list[StepRecord] = []
        loop.add_sink(records.append)
        made.append(Rig(loop, holder["robot"], written, records, config))
        return made[-1]

    yield make
    for rig in made:
        rig.loop.stop()
        rig.robot.stop()


@pytest.fixture
def rig(make_rig):
    r = make_rig()
    return r.loop, r.robot, r.written, r.records, r.config


def _wait(predicate, loop: ControlLoop, timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        c = loop.controller
        assert time.monotonic() < end, f"not reached: mode {c.mode}, fault {c.fault_reason}, {loop.stats()}"
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
    sent = len(written)  # read before the stats: the loop goes on writing meanwhile
    stats = loop.stats()
    assert stats.steps >= len(stepped) - 1 and stats.latency is not None and stats.latency.p99_us > 0
    assert stats.written >= sent - 1 and stats.withheld == 0 and stats.wake_late is not None
    flat = stats.as_dict()
    assert flat["deadline_misses"] == stats.late_steps and flat["latency_p99_us"] == stats.latency.p99_us
    assert flat["late_ran_ms"] == stats.late_split.ran_ms and flat["late_off_cpu_ms"] == stats.late_split.off_cpu_ms
    assert 0 < stats.ran_us_per_step < 20_000 and stats.cpu_wait_us_per_step >= 0  # its schedstat, read each step
    assert flat["ran_us_per_step"] == stats.ran_us_per_step


def test_cpu_per_step_is_the_mean_since_the_first_step() -> None:
    """(on a CPU, waiting for one) per grid step: the first step's reading is the baseline."""
    timing = _Timing()
    assert timing.cpu_per_step_us() == (0.0, 0.0)
    timing.cpu((5_000_000, 7_000_000, 0))
    assert timing.cpu_per_step_us() == (0.0, 0.0)
    for step in range(1, 5):
        timing.cpu((5_000_000 + step * 900_000, 7_000_000 + step * (100_000 if step % 2 else 300_000), 0))
    assert timing.cpu_per_step_us() == (900.0, 300.0)  # the cumulative wait is 1.2 ms after 4 steps


def test_estop_is_written_before_the_next_deadline(make_rig) -> None:
    """The e-stop writes damping at once: before the grid's next deadline, not on it. The loop
    runs at 10 Hz here (no actors, PD hold), so that deadline is far from the e-stop. It is known
    from the last grid write before the e-stop: that step's deadline lay at most the state wait
    plus its compute time before the write, and the next deadline is one period later."""
    rig = make_rig(actors=False, period_s=0.1)
    loop, robot, written, config = rig.loop, rig.robot, rig.written, rig.config
    period_ns = round(0.1 * 1e9)
    robot.start()
    loop.start()
    _wait(lambda: len(written) >= 2, loop)
    loop.request(Stand())
    _wait(lambda: loop.controller.mode is Mode.HOLD, loop)
    count = len(written)
    _wait(lambda: len(written) > count, loop)  # a grid write just happened
    last_grid_write_ns = written.raw[-1][0]
    slowest_step_ns = int(loop.stats().compute.max_us * 1e3)
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
    _wait(lambda: loop.controller.mode is Mode.DAMPING, loop)
    assert loop.controller.fault_reason == "e-stop: test"


def test_deadlines_lie_on_multiples_of_the_period_whenever_the_loop_starts(make_rig) -> None:
    """Started half a period off the grid, the loop still steps on multiples of its period of the
    monotonic clock (the instants the benchmarks' floor probe sleeps to): its grid writes come
    within the state wait and a step after one, not half a period after."""
    rig = make_rig(actors=False, period_s=0.1)
    loop, robot, written = rig.loop, rig.robot, rig.written
    period_ns = round(0.1 * 1e9)
    robot.start()
    time.sleep((period_ns * 3 // 2 - time.monotonic_ns() % period_ns) / 1e9)  # to k·period + period / 2
    loop.start()
    _wait(lambda: len(written) >= 6, loop)
    phases_ms = sorted((t % period_ns) / 1e6 for t, _ in written.raw[1:6])
    print(f"\n  grid writes at {', '.join(f'{p:.1f}' for p in phases_ms)} ms past multiples of 100 ms")
    assert phases_ms[2] < 25.0, phases_ms


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


def test_malformed_sample_is_counted_and_never_used(rig) -> None:
    loop, robot, written, _, _ = rig
    robot.start()
    loop.start()
    _wait(lambda: len(written) >= 2, loop)
    loop.request(Stand())
    _wait(lambda: loop.controller.mode is Mode.HOLD, loop)
    robot.corrupt_next = True
    _wait(lambda: loop.stats().decode_errors >= 1, loop)
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


# --- helpers for the safety tests ----------------------------------------------------------


def kp_of(msg) -> np.ndarray:
    return np.array([m.kp for m in msg.motor_cmd[:NUM_MOTORS]])


def is_damping(msg, config: ControllerConfig) -> bool:
    kd = np.array([m.kd for m in msg.motor_cmd[:NUM_MOTORS]])
    return not kp_of(msg).any() and np.allclose(kd, config.damping_kd)


def standing(rig: Rig) -> None:
    rig.robot.start()
    rig.loop.start()
    _wait(lambda: len(rig.written) >= 2, rig.loop)
    rig.loop.request(Stand())
    _wait(lambda: rig.loop.controller.mode is Mode.HOLD, rig.loop)


class SteppableSystemClock:
    """Test double for the system clock alone: monotonic time is the real one, system time the
    real one plus an offset the test steps (an NTP correction, an operator setting the date)."""

    def __init__(self) -> None:
        self.offset_ns = 0
        self.clock = Clock(monotonic_ns=time.monotonic_ns, time_ns=lambda: time.time_ns() + self.offset_ns)


class BlockingStep:
    """Test double with FaultInjection's interface: once armed, the next step in HOLD blocks in
    the step lock (as a slow actor would) until released."""

    def __init__(self) -> None:
        self.armed, self.entered, self.release = threading.Event(), threading.Event(), threading.Event()

    def clock(self, base):
        return base

    def install(self, controller) -> None:
        pass

    def describe(self) -> str:
        return "a step blocks until released (test)"

    def before_step(self, control_tick: int) -> None:
        pass

    def after_step(self, output) -> None:
        if self.armed.is_set() and not self.entered.is_set() and output.mode is Mode.HOLD:
            self.entered.set()
            self.release.wait(10.0)


# --- e-stop never waits for a step ---------------------------------------------------------


def test_estop_during_a_blocked_step_writes_damping_at_once_and_nothing_else_after(make_rig) -> None:
    blocker = BlockingStep()
    rig = make_rig(fault_injection=blocker)
    standing(rig)
    blocker.armed.set()
    assert blocker.entered.wait(5.0), "no step blocked"
    before = len(rig.written)
    assert kp_of(rig.written[-1][1]).any()  # HOLD: stiffness on
    reply = threading.Thread(target=rig.loop.request, args=(EStop("test"),))
    reply.start()
    reply.join(2.0)
    assert not reply.is_alive(), "the e-stop waited for the running step"
    assert not blocker.release.is_set()  # the step is still running
    assert len(rig.written) == before + 1 and is_damping(rig.written[-1][1], rig.config)
    assert rig.loop.mode is Mode.DAMPING and rig.loop.controller.mode is Mode.HOLD  # applied at its next step
    assert rig.loop.fault_reason == "e-stop: test"
    blocker.release.set()
    _wait(lambda: rig.loop.controller.mode is Mode.DAMPING, rig.loop)
    _wait(lambda: len(rig.written) >= before + 5, rig.loop)
    assert all(is_damping(m, rig.config) for _, m in rig.written[before:]), "a non-damping LowCmd after the e-stop"
    assert rig.loop.controller.fault_reason == "e-stop: test"
    _wait(lambda: len(rig.records) >= len(rig.written) - 2, rig.loop)
    blocked = next(r for r in rig.records if r.output.mode is Mode.HOLD and not r.output.command.kp.any())
    np.testing.assert_array_equal(blocked.output.command.kd, rig.config.damping_kd)  # recorded as written


def test_a_request_after_a_latched_estop_sees_damping(make_rig) -> None:
    """Stop/Reset wait for the step lock and apply the latched e-stop first: Stop is refused in
    DAMPING, and only Reset (to PASSIVE) lifts the damping-only latch."""
    blocker = BlockingStep()
    rig = make_rig(fault_injection=blocker)
    standing(rig)
    blocker.armed.set()
    assert blocker.entered.wait(5.0)
    rig.loop.request(EStop("test"))
    blocker.release.set()
    with pytest.raises(RejectedRequest, match="DAMPING is latched"):
        rig.loop.request(Stop())
    rig.loop.request(Reset())
    assert rig.loop.mode is Mode.PASSIVE
    _wait(lambda: rig.loop.controller.last_check is None and len(rig.records) > 0
          and rig.records[-1].output.mode is Mode.PASSIVE, rig.loop)  # a healthy state seen in PASSIVE
    rig.loop.request(Stand())
    _wait(lambda: rig.loop.controller.mode is Mode.HOLD, rig.loop)
    _, last = rig.written[-1]
    assert kp_of(last).any()


# --- last resort -----------------------------------------------------------------------------


def test_a_step_that_raises_latches_damping_and_the_loop_streams_it(make_rig) -> None:
    rig = make_rig(fault_injection=FaultInjection(parse_faults("raise@tick=40")))
    standing(rig)
    _wait(lambda: rig.loop.fatal_error is not None, rig.loop)
    reason = rig.loop.fatal_error
    assert reason.startswith("control step raised InjectedFault('injected by ASAP_ROS_FAULT_INJECTION (raise@tick=40)') "
                             "at fault_injection.py:"), reason
    fatal = len(rig.written)
    _wait(lambda: len(rig.written) >= fatal + 10, rig.loop)  # damping every period, on the grid
    assert all(is_damping(m, rig.config) for _, m in rig.written[fatal - 1:])
    assert rig.loop.alive and rig.loop.mode is Mode.DAMPING and rig.loop.fault_reason == reason
    assert rig.loop.controller.mode is Mode.DAMPING and rig.loop.controller.fault_reason == reason
    _wait(lambda: len(rig.records) >= fatal + 5, rig.loop)
    switch = [r for r in rig.records if r.output.transition is not None and r.output.transition.reason == reason]
    assert len(switch) == 1 and switch[0].control_tick == 40 and switch[0].output.transition.to_mode is Mode.DAMPING
    assert all(r.output.mode is Mode.DAMPING for r in rig.records if r.control_tick >= 40)
    for request in (Reset(), Stand(), Stop()):
        with pytest.raises(RejectedRequest, match="the control loop failed .* until asap_deploy is restarted"):
            rig.loop.request(request)
    rig.loop.request(EStop("still accepted"))


def test_an_injected_clock_step_moves_every_system_stamp_and_no_command(make_rig) -> None:
    """``clock=-10@tick=30``: the records' and the LowState arrivals' system stamps step 10 s back
    after step 30; the loop holds on, every command written, no fault."""
    rig = make_rig(fault_injection=FaultInjection(parse_faults("clock=-10@tick=30")))
    standing(rig)
    _wait(lambda: len(rig.records) >= 40, rig.loop)
    by_tick = {r.control_tick: r for r in rig.records}
    assert -10.2e9 < by_tick[31].stamp_ns - by_tick[29].stamp_ns < -9.8e9
    assert -10.2e9 < by_tick[40].lowstate_stamp_ns - by_tick[29].lowstate_stamp_ns < -9.5e9
    assert rig.loop.mode is Mode.HOLD and rig.loop.fault_reason is None and rig.loop.fatal_error is None
    assert all(r.written for r in rig.records)


def test_a_writer_that_fails_stops_the_records_and_the_lease_beats(make_rig) -> None:
    """A record and a lease beat exist only for a written (or withheld) LowCmd: with a broken
    writer the supervisor hears silence and takes over."""
    arbiter = AnsweringSupervisor()
    rig = make_rig(fail_write=lambda count: count >= 30, arbiter=arbiter)
    standing(rig)
    _wait(lambda: rig.loop.stats().write_errors >= 5, rig.loop)
    assert rig.loop.fatal_error == "control step raised RuntimeError('rt/lowcmd writer gone') at test_control_loop.py:" \
        + rig.loop.fatal_error.rsplit(":", 1)[1]
    records, beats = len(rig.records), arbiter.seq
    time.sleep(0.2)
    assert len(rig.records) == records and arbiter.seq == beats  # no record and no beat since
    assert sum(r.written for r in rig.records) == len(rig.written) == 30
    assert rig.loop.alive and rig.loop.stats().write_errors >= 10  # still trying, every period


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread's end is the test
def test_the_control_thread_ending_stops_the_commands_and_records(make_rig) -> None:
    rig = make_rig(fault_injection=FaultInjection(parse_faults("exit@tick=10")))
    rig.robot.start()
    rig.loop.start()
    _wait(lambda: not rig.loop.alive, rig.loop)
    assert rig.loop.fatal_error == "control thread ended: SystemExit('injected by ASAP_ROS_FAULT_INJECTION (exit@tick=10)')"
    written, records = len(rig.written), len(rig.records)
    time.sleep(0.2)
    assert (len(rig.written), len(rig.records)) == (written, records) == (9, 9)


# --- clocks ------------------------------------------------------------------------------------


def test_a_system_clock_step_during_stand_up_changes_nothing(make_rig) -> None:
    """The system clock steps back 10 s, then 20 s ahead, during a 0.3 s stand-up: the stand-up
    still takes its 0.3 s on the monotonic clock, its gains ramp without a jump, no state looks
    stale and no fault latches; only the records' stamps carry the steps."""
    system = SteppableSystemClock()
    rig = make_rig(clock=system.clock)
    rig.robot.start()
    rig.loop.start()
    _wait(lambda: len(rig.written) >= 2, rig.loop)
    began, first = time.monotonic(), len(rig.written)
    rig.loop.request(Stand())
    time.sleep(0.08)
    system.offset_ns = -10 * 10**9
    time.sleep(0.08)
    system.offset_ns = 10 * 10**9
    _wait(lambda: rig.loop.controller.mode is not Mode.STAND_UP, rig.loop)
    assert rig.loop.controller.mode is Mode.HOLD, rig.loop.controller.fault_reason
    assert time.monotonic() - began >= rig.config.stand_up_duration_s
    knee_kp = [kp_of(m)[3] for _, m in rig.written[first:]]
    ramp = load_robot_model().kp[3] * (1 - rig.config.stand_up_kp_start_fraction)
    assert max(np.diff(knee_kp)) < ramp / 2, "the gains jumped"
    _wait(lambda: len(rig.records) >= len(rig.written) - 1, rig.loop)
    stamps = np.diff([r.stamp_ns for r in rig.records])
    assert stamps.min() < -9 * 10**9 and stamps.max() > 19 * 10**9


# --- control rate ------------------------------------------------------------------------------


def test_a_control_rate_other_than_the_actors_is_refused(rig) -> None:
    loop = rig[0]
    with pytest.raises(ConfigError, match=r"ControlLoop: 1 / period_s: must match the actors' control_dt 0\.02 s "
                                          r"\(50 Hz, phase\.control_dt in .*CR7_level1\.yaml\)"):
        ControlLoop(loop.controller, lambda payload: None, period_s=0.025)
    with pytest.raises(ConfigError, match=r"deploy\.yaml: control_rate_hz: must match .* \(got 40\.0\)"):
        check_control_rate(40.0, loop.controller, "deploy.yaml")
    check_control_rate(50.0, loop.controller, "deploy.yaml")


# --- the rt/lowcmd lease ---------------------------------------------------------------------


class AnsweringSupervisor:
    """Test double for :class:`~asap_ros.runtime.arbitration.LowCmdArbiter`'s DDS side only: the
    real :class:`WriteLease`, and a supervisor that answers every beat at once with the grant
    state the test sets (``state``, ``reason``; ``silent``: no answer)."""

    SUPERVISOR = 0x51

    def __init__(self, lease_ns: int = 1_000_000_000) -> None:  # generous: a loaded 2-core machine stalls now and then
        # the command timeout as generous (these tests are not about it; tests/core/test_lease_explorer.py is)
        self.lease = WriteLease(session=7, period_ns=20_000_000, lease_ns=lease_ns, command_timeout_ns=lease_ns)
        self.lease_ns = lease_ns
        self.state, self.reason, self.silent = Supervision.WATCHING, "", False
        self.seq = 0
        self.flags: list = []

    def verdict(self, now_ns: int):
        return self.lease.verdict(now_ns)

    def beat(self, mode: Mode, now_ns: int, wrote: bool, hears_robot: bool) -> None:
        self.seq += 1
        self.lease.beat(self.seq, now_ns)
        self.flags.append(self.lease.beat_flags(wrote, hears_robot))
        if not self.silent:
            self.lease.receive(Grant(self.state, self.SUPERVISOR, self.lease.session, self.seq, self.lease_ns,
                                     self.reason), b"supervisor", now_ns)

    def allows_write(self, now_ns: int) -> bool:
        return self.lease.allows_write(now_ns)

    def wrote(self, now_ns: int) -> None:
        self.lease.wrote(now_ns)

    def command_gap_fault(self, now_ns: int) -> str | None:
        return self.lease.command_gap_fault(now_ns)

    def estop_taken(self, now_ns: int) -> None:
        self.lease.estop_taken(now_ns)


def granted_rig(make_rig, lease_ns: int = 1_000_000_000, **options) -> tuple[Rig, AnsweringSupervisor]:
    arbiter = AnsweringSupervisor(lease_ns)
    rig = make_rig(arbiter=arbiter, **options)
    rig.robot.start()
    rig.loop.start()
    _wait(lambda: len(rig.written) >= 2, rig.loop)
    rig.loop.request(Stand())
    _wait(lambda: rig.loop.controller.mode is Mode.HOLD, rig.loop)
    return rig, arbiter


def test_a_takeover_latches_damping_and_then_nothing_is_written_not_even_an_estop(make_rig) -> None:
    rig, arbiter = granted_rig(make_rig)
    arbiter.state, arbiter.reason = Supervision.TAKEOVER, "test takeover"
    _wait(lambda: rig.loop.controller.mode is Mode.DAMPING, rig.loop)
    written = len(rig.written)
    assert rig.loop.controller.fault_reason == "e-stop: supervisor took over rt/lowcmd (test takeover)"
    rig.loop.request(EStop("during the takeover"))  # its damping write is the supervisor's now
    time.sleep(0.2)
    assert len(rig.written) == written and rig.loop.stats().withheld >= 5
    _wait(lambda: len(rig.records) >= 10 and not rig.records[-1].written, rig.loop)
    (latched,) = [r for r in rig.records if r.fault_latched]
    assert latched.output.mode is Mode.DAMPING and not latched.written  # the first damping step, withheld
    assert all(not r.written for r in rig.records if r.control_tick >= latched.control_tick)


def test_an_estop_within_the_lease_is_written_at_once_and_marked_on_the_next_step(make_rig) -> None:
    blocker = BlockingStep()
    rig, arbiter = granted_rig(make_rig, fault_injection=blocker)
    blocker.armed.set()
    assert blocker.entered.wait(5.0), "no step blocked"
    before = len(rig.written)
    rig.loop.request(EStop("test"))
    assert len(rig.written) == before + 1 and is_damping(rig.written[-1][1], rig.config)
    blocker.release.set()
    _wait(lambda: rig.loop.controller.mode is Mode.DAMPING and len(rig.records) >= len(rig.written) - 2, rig.loop)
    (latched,) = [r for r in rig.records if r.fault_latched]
    assert latched.output.mode is Mode.HOLD and latched.written  # the blocked step, its command replaced by damping
    np.testing.assert_array_equal(latched.output.command.kd, rig.config.damping_kd)


def test_the_last_resort_damping_goes_through_the_lease(make_rig) -> None:
    """A step raises under a takeover: the last resort latches DAMPING and writes nothing."""
    rig, arbiter = granted_rig(make_rig, fault_injection=FaultInjection(parse_faults("raise@tick=60")))
    arbiter.state, arbiter.reason = Supervision.TAKEOVER, "test takeover"
    _wait(lambda: rig.loop.controller.mode is Mode.DAMPING, rig.loop)
    written = len(rig.written)
    _wait(lambda: rig.loop.fatal_error is not None, rig.loop)
    time.sleep(0.1)
    assert len(rig.written) == written
    assert rig.records[-1].output.mode is Mode.DAMPING and not rig.records[-1].written


def test_a_step_that_outlives_its_lease_between_verdict_and_write_writes_nothing_and_damps(make_rig) -> None:
    """The shipped 150 ms lease and a 300 ms stall injected after the verdict, before the write
    (``slow``): the step's kp > 0 command is dropped at the write, DAMPING latched."""
    faults = FaultInjection(parse_faults("slow=0.3@tick=80"))
    rig, arbiter = granted_rig(make_rig, lease_ns=150_000_000, fault_injection=faults)
    _wait(lambda: rig.loop.controller.mode is Mode.DAMPING, rig.loop)
    stats = rig.loop.stats()
    assert stats.outlived_lease >= 1 and stats.withheld >= 1
    assert rig.loop.controller.fault_reason.startswith("e-stop: control step outlived its lease: began ")
    _wait(lambda: len(rig.records) >= 82, rig.loop)
    stalled = next(r for r in rig.records if r.control_tick == 80)
    assert not stalled.written and stalled.output.command.kp.any()  # computed with stiffness, never sent
    later = [r for r in rig.records if r.control_tick > 80]
    assert later and all(r.output.command.kp.max() == 0 for r in later)
    assert all(is_damping(m, rig.config) for _, m in rig.written[-2:])


def test_a_write_that_returns_after_its_lease_ended_latches_damping(make_rig) -> None:
    """The shipped 150 ms lease and a write that takes 300 ms (the process stopped inside it, after
    the permission was checked): its kp > 0 command may reach the robot beside the supervisor's
    damping; no check before a write can prevent that, the loop says it happened and damps."""
    stalled_at: list[int] = []

    def stall(count: int) -> float:
        if not stalled_at and count >= 60:
            stalled_at.append(count)
            return 0.3
        return 0.0

    rig, arbiter = granted_rig(make_rig, lease_ns=150_000_000, stall_write=stall)
    _wait(lambda: rig.loop.controller.mode is Mode.DAMPING, rig.loop)
    assert rig.loop.stats().written_past_lease == 1
    assert rig.loop.controller.fault_reason.startswith(
        "e-stop: a LowCmd write returned after its lease had ended: it took 30")
    (late_write,) = stalled_at
    assert not is_damping(rig.written[late_write][1], rig.config)  # the stiff command that went out late
    _wait(lambda: len(rig.written) >= late_write + 5, rig.loop)
    assert all(is_damping(m, rig.config) for _, m in rig.written[late_write + 2:])


def test_a_silent_supervisor_makes_the_loop_stream_damping_itself(make_rig) -> None:
    rig, arbiter = granted_rig(make_rig, lease_ns=150_000_000)
    arbiter.silent = True
    _wait(lambda: rig.loop.controller.mode is Mode.DAMPING, rig.loop)
    _wait(lambda: arbiter.lease.last_verdict.writer is Writer.OWN_DAMPING, rig.loop)
    count = len(rig.written)
    _wait(lambda: len(rig.written) >= count + 5, rig.loop)
    assert all(is_damping(m, rig.config) for _, m in rig.written[count:])
    assert "no grant from the supervisor" in rig.loop.controller.fault_reason  # the first reason stays latched
    assert "damping from asap_deploy" in arbiter.lease.last_verdict.fault
    assert arbiter.flags[-1] & arbiter.flags[-1].TOOK_BACK


def test_garbage_is_collected_by_the_sink_thread_after_the_steps(rig) -> None:
    """Python's automatic collection is off while the loop runs (it would run mid-step on whichever
    thread allocates); the sink thread collects after each step, and the longest is reported."""
    import gc

    loop, robot, written, records, _ = rig
    robot.start()
    loop.start()
    try:
        assert not gc.isenabled()
        _wait(lambda: len(records) >= 20, loop)
        assert loop.stats().gc_max_ms > 0.0
    finally:
        loop.stop()
    assert gc.isenabled()


def test_a_wait_for_a_state_that_does_not_come_is_not_a_late_step(make_rig) -> None:
    """The robot's stream stops: every step waits ``state_wait_s`` (12 ms, past the 5 ms late
    margin) for a state; that is the stream's delay, judged by the state-age limit, not the loop's.
    Counted as the loop's, every waiting step would be late; a quarter of them is left for steps
    this guest makes late on its own (up to 3 of ~20 here, with the host stealing ~1% of the CPUs)."""
    rig = make_rig(actors=False, state_wait_s=0.012, period_s=0.02)
    rig.robot.start()
    rig.loop.start()
    _wait(lambda: len(rig.records) >= 5, rig.loop)
    rig.robot.stop()
    before = rig.loop.stats()
    time.sleep(0.4)
    after = rig.loop.stats()
    waits = after.state_waits - before.state_waits
    assert waits >= 8, (before, after)
    assert 4 * (after.late_steps - before.late_steps) <= waits, (before, after)


def _make_cycles(count: int) -> None:
    """``count`` unreachable reference cycles of two lists each, for the cycle collector."""
    for _ in range(count):
        a: list = []
        a.append([a])


def _cycles_collected_in(seconds: float) -> int:
    """How many cycles of :func:`_make_cycles` one young collection takes ``seconds`` to free here
    (measured: the machine's speed sets the count, not this file)."""
    import gc

    count, enabled = 50_000, gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        _make_cycles(count)
        began = time.perf_counter()
        gc.collect(0)
        took = time.perf_counter() - began
    finally:
        if enabled:
            gc.enable()
    return int(count * seconds / max(took, 1e-6))


def test_late_steps_say_whether_the_thread_woke_late_or_a_collection_held_it(make_rig) -> None:
    """A step that is slow by itself is late without waking late (a sleep in it: off-CPU, not
    running, by the thread's schedstat); a collection on the sink thread
    that holds the GIL past a deadline makes a step late, counted inside the collection."""
    cycles = _cycles_collected_in(0.08)  # measured before any other thread runs: alone, not contended
    rig = make_rig(actors=False, period_s=0.02, fault_injection=FaultInjection(parse_faults("slow=0.015@tick=30")))
    rig.robot.start()
    rig.loop.start()
    _wait(lambda: len(rig.records) >= 20, rig.loop)
    before = rig.loop.stats()
    _wait(lambda: len(rig.records) >= 35, rig.loop)
    slow = rig.loop.stats()
    late, woke = slow.late_steps - before.late_steps, slow.late_woke - before.late_woke
    assert late >= 1 and late - woke >= 1, (before, slow)  # step 30: 15 ms of its own
    # that step slept 15 ms inside the step: off-CPU by the thread's own schedstat, not running
    off = slow.late_split.off_cpu_ms - before.late_split.off_cpu_ms
    ran = slow.late_split.ran_ms - before.late_split.ran_ms
    assert off >= 14.0 and ran < off, (before.late_split, slow.late_split)

    garbage_at, made = len(rig.records) + 5, []

    def make_cyclic_garbage(record: StepRecord) -> None:
        if not made and record.control_tick >= garbage_at:  # the next young collection holds the GIL ~80 ms
            made.append(record.control_tick)
            _make_cycles(cycles)

    rig.loop.add_sink(make_cyclic_garbage)
    # the sink thread collects only once its queue is empty: the records queued while the garbage
    # was made are drained first, so wait for the collection itself, then for steps after it
    _wait(lambda: bool(made) and rig.loop.stats().gc_max_ms > 25.0, rig.loop)  # longer than a period + margin
    collected_at = len(rig.records)
    _wait(lambda: len(rig.records) >= collected_at + 5, rig.loop)
    held = rig.loop.stats()
    # the held step is counted in the collection; whether it also woke late depends on where in
    # the 20 ms grid the collection began (before its deadline, or during its step)
    assert held.late_in_gc - slow.late_in_gc >= 1, (slow, held)
