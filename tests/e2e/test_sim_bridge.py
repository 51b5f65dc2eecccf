"""The simulated G1 end to end: real Cyclone DDS on loopback via unitree_sdk2py, real MuJoCo.

The simulator runs in this process on the session's DDS domain (one at a time); senders
that must die abruptly and the ``asap_sim`` command line run as subprocesses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from cyclonedds.pub import DataWriter
from cyclonedds.topic import Topic
from unitree_sdk2py.core.channel import ChannelPublisher, ChannelSubscriber
from unitree_sdk2py.idl.default import unitree_hg_msg_dds__LowCmd_
from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_
from unitree_sdk2py.utils.crc import CRC

from asap_ros.config.robot import load_robot_model
from asap_ros.core.state import NUM_MOTORS, JointCommand, RobotState
from asap_ros.g1.codec import LowCmdEncoder, decode_lowstate_cdr, state_from_record
from asap_ros.g1.crc import record_crc
from asap_ros.g1.layout import LOWCMD_WIRE, LOWSTATE_WIRE
from asap_ros.g1.sdk import SdkLowCmdEncoder, decode_lowstate, lowcmd_record, lowstate_crc_ok
from asap_ros.runtime.dds import PolledReader, RawReader, RawWriter, close_entity, init_channels, participant
from asap_ros.runtime.domains import DOMAINS
from asap_ros.sim.config import load_sim_config
from asap_ros.sim.control import CONTROL_QOS, SimControlClient
from asap_ros.sim.dds_types import (
    BAND_LOWER,
    BAND_RELEASE,
    CONTROL_TOPIC,
    GROUND_TRUTH_TOPIC,
    GroundTruth_,
    SimControl_,
)
from asap_ros.sim.main import main as sim_main
from asap_ros.sim.process import dying_with_this_process
from asap_ros.sim.simulator import Simulator

REPO = Path(__file__).resolve().parents[2]
LEFT_ELBOW = 18
KNEES = [3, 9]
MODE_MACHINE = 5


@pytest.fixture(scope="module")
def lowcmd_pub(dds_domain):
    init_channels(dds_domain, "lo")
    publisher = ChannelPublisher("rt/lowcmd", LowCmd_)
    publisher.Init()
    yield publisher
    publisher.Close()  # deleted now, not by a later garbage collection (its listener runs Python)


@pytest.fixture(scope="module")
def robot():
    return load_robot_model()


@contextlib.contextmanager
def running_sim(dds_domain: int, **changes):
    """An in-process simulator on the test domain (mocap off unless ``mocap`` is given)."""
    base = load_sim_config()
    changes.setdefault("mocap", dataclasses.replace(base.mocap, rate_hz=0.0))
    sim = Simulator(dataclasses.replace(base, **changes), dds_domain)
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


class LowStateLog:
    """Every rt/lowstate sample as raw bytes with its arrival stamp (no Python deserialiser)."""

    def __init__(self) -> None:
        self.samples: list[tuple[bytes, int]] = []
        self._reader = RawReader("rt/lowstate", LowState_, lambda payload, stamp, _writer: self.samples.append((payload, stamp)))

    def states(self) -> list[RobotState]:
        return [state_from_record(LOWSTATE_WIRE.from_cdr(p), s, s) for p, s in self.samples]

    def close(self) -> None:
        self._reader.close()


class GroundTruthLog:
    """Every rt/asap_sim/ground_truth sample (instance-state notifications skipped)."""

    def __init__(self) -> None:
        self.samples: list[GroundTruth_] = []
        self._reader = RawReader(GROUND_TRUTH_TOPIC, GroundTruth_,
                                 lambda payload, _stamp, _writer: self.samples.append(GroundTruth_.deserialize(payload)))

    def close(self) -> None:
        self._reader.close()


def command(robot, **targets: float) -> JointCommand:
    """Hold the default pose with ASAP's gains, some joints (by motor index name) elsewhere."""
    q = np.array(robot.default_q)
    for index, value in targets.items():
        q[int(index.removeprefix("m"))] = value
    return JointCommand(q=q, kp=np.array(robot.kp), kd=np.array(robot.kd))


def stream(publisher, messages, seconds: float, period_s: float = 0.02) -> int:
    """Write ``messages()`` (a list of samples per period) at 50 Hz for ``seconds``; returns periods."""
    periods = 0
    deadline = time.monotonic()
    end = deadline + seconds
    while deadline < end:
        for write in messages():
            write()
        periods += 1
        deadline += period_s
        time.sleep(max(0.0, deadline - time.monotonic()))
    return periods


def wait_for(predicate, timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.01)


def test_lowstate_arrives_at_configured_rate_with_valid_crc(dds_domain, lowcmd_pub):
    ground_truth = GroundTruthLog()
    sdk_samples: list = []
    with running_sim(dds_domain) as sim:
        sdk = ChannelSubscriber("rt/lowstate", LowState_)  # the SDK's deserialiser: ~0.5 ms per sample
        sdk.Init(lambda msg: len(sdk_samples) < 20 and sdk_samples.append(msg))
        wait_for(lambda: len(sdk_samples) >= 20, 3.0, "LowStates through the SDK subscriber")
        sdk.Close()
        log = LowStateLog()
        wait_for(lambda: len(log.samples) > 10, 3.0, "first raw LowStates")
        log.samples.clear()
        started = time.monotonic()
        time.sleep(1.0)
        samples = list(log.samples)
        elapsed = time.monotonic() - started
        log.close()
        stats = sim.stats()
    ground_truth.close()
    rate = len(samples) / elapsed
    records = [LOWSTATE_WIRE.from_cdr(p) for p, _ in samples]
    ticks = np.array([int(r["tick"]) for r in records])
    print(f"\n  rt/lowstate: {rate:.0f} Hz measured over {elapsed:.2f} s (configured 500 Hz); "
          f"sim real-time factor {stats['real_time_factor']:.3f}, step cost p50 {stats['step_cost_us']['p50']:.0f} us "
          f"p99 {stats['step_cost_us']['p99']:.0f} us")
    assert all(int(r["crc"]) == record_crc(r) for r in records)
    assert all(int(r["mode_machine"]) == MODE_MACHINE for r in records)
    assert np.median(np.diff(ticks)) == 2  # one LowState per 2 ms of simulated time
    assert (np.diff(ticks) % 2 == 0).all() and (np.diff(ticks) > 0).all()
    assert rate > 125  # loose (a quarter): the machine is shared; the figure is printed above
    # the SDK's own subscriber and CRC accept the raw-written samples
    assert all(lowstate_crc_ok(msg) for msg in sdk_samples)
    state = decode_lowstate(sdk_samples[-1], time.time_ns(), time.monotonic_ns())
    assert state.crc_ok and np.linalg.norm(state.quat_wxyz) == pytest.approx(1.0, abs=1e-5)
    # one ground-truth sample per LowState, same tick, exact (nominal: noise-free) pose
    by_tick = {gt.tick: gt for gt in ground_truth.samples}
    matched = [(r, by_tick[int(r["tick"])]) for r in records if int(r["tick"]) in by_tick]
    assert len(matched) > 0.9 * len(records)
    for record, gt in matched[:50]:
        np.testing.assert_allclose(record["imu_state"]["quaternion"], gt.pelvis_quat_wxyz, atol=1e-6)
        np.testing.assert_allclose(record["motor_state"]["q"][:NUM_MOTORS], gt.q, atol=1e-6)
        assert gt.band_enabled and abs(gt.sim_time * 1000 - gt.tick) < 1e-6


@pytest.mark.parametrize("lead_ms", [0.6, 10.6])
def test_each_lowstate_is_written_its_lead_after_its_step_began_on_the_clock_s_grid(dds_domain, lowcmd_pub, lead_ms):
    """The physics steps on the monotonic clock's grid; a LowState's step starts ``lowstate_lead_ms``
    before a multiple of the LowState period (here 20 ms: one LowState per ten steps), so a control
    loop stepping on those multiples finds one just written. Its writer's source stamp (wall
    clock) says when: the step and the encoding after the step's instant (~0.5 ms here)."""
    stamps: list[int] = []
    reader = RawReader("rt/lowstate", LowState_, lambda _payload, _arrival, _writer, source: stamps.append(source),
                       source_stamps=True)
    try:
        with running_sim(dds_domain, lowstate_rate_hz=50.0, lowstate_lead_ms=lead_ms) as sim:
            wait_for(lambda: len(stamps) >= 40, 5.0, "40 LowStates")
            published = sim.lowstates_published
    finally:
        reader.close()
    wall_minus_monotonic = time.time_ns() - time.monotonic_ns()
    period_ns, lead_ns = 20_000_000, round(lead_ms * 1e6)
    after_ms = [(stamp - wall_minus_monotonic + lead_ns) % period_ns / 1e6 for stamp in stamps[5:]]
    print(f"\n  lead {lead_ms} ms: LowState written p50 {np.median(after_ms):.2f} ms after its step's instant "
          f"(p90 {np.percentile(after_ms, 90):.2f} ms), {published} published")
    assert np.median(after_ms) < 4.0, sorted(after_ms)  # of the 20 ms period


def test_polled_reader_takes_each_next_lowstate_and_keeps_the_newest_when_none_comes(dds_domain, lowcmd_pub):
    """The control loop's input: no listener; the asking thread takes samples from the reader."""
    reader = PolledReader("rt/lowstate", LowState_)
    try:
        with running_sim(dds_domain) as sim:
            assert reader.next_arrival(5.0)[0] is not None
            ticks = []
            for _ in range(20):
                asked, asked_monotonic = time.time_ns(), time.monotonic_ns()
                payload, stamp_ns, arrival_ns = reader.next_arrival(0.5)
                assert stamp_ns >= asked and arrival_ns >= asked_monotonic  # arrived after the call
                ticks.append(int(LOWSTATE_WIRE.from_cdr(payload)["tick"]))
            published = sim.lowstates_published
        assert all(later > earlier for earlier, later in zip(ticks, ticks[1:])), ticks
        assert published >= 20
        newest = reader.newest()
        assert reader.next_arrival(0.2) == newest  # simulator stopped: nothing new, the newest stays
    finally:
        reader.close()


def test_raw_reader_gets_this_process_own_writes_unless_told_to_ignore_them(dds_domain, lowcmd_pub):
    """The handler runs on the reader's thread, not Cyclone's: a write from this process (which
    holds the GIL while Cyclone delivers locally) neither deadlocks nor is lost."""
    init_channels(dds_domain, "lo")
    received: list[bytes] = []
    ignored: list[bytes] = []
    own = RawReader("rt/raw_reader_test", LowCmd_, lambda payload, _stamp, _writer: received.append(payload))
    foreign_only = RawReader("rt/raw_reader_test", LowCmd_, lambda payload, _stamp, _writer: ignored.append(payload),
                             ignore_local=True)
    writer = RawWriter("rt/raw_reader_test", LowCmd_)
    encoder = LowCmdEncoder()
    command = JointCommand(kp=np.ones(NUM_MOTORS))
    sent = [encoder.encode_cdr(command, mode_machine) for mode_machine in range(50)]
    try:
        for payload in sent:
            writer.write(payload)
            time.sleep(0.002)
        wait_for(lambda: len(received) == len(sent), 5.0, "own writes")
        time.sleep(0.1)
    finally:
        for entity in (own, foreign_only, writer):
            entity.close()
    assert received == sent and ignored == []


def test_a_raw_reader_handler_that_raises_is_counted_and_the_reader_goes_on(dds_domain, lowcmd_pub):
    init_channels(dds_domain, "lo")
    received: list[bytes] = []

    def handler(payload: bytes, _stamp: int, _writer: int) -> None:
        received.append(payload)
        LOWCMD_WIRE.from_cdr(payload)  # ValueError on a malformed sample

    reader = RawReader("rt/raw_reader_errors", LowCmd_, handler)
    writer = RawWriter("rt/raw_reader_errors", LowCmd_)
    good = LowCmdEncoder().encode_cdr(JointCommand(), 5)
    try:
        for payload in (good, good + bytes(8), good):  # the middle one has 8 bytes too many
            writer.write(payload)
            time.sleep(0.01)
        wait_for(lambda: len(received) == 3, 5.0, "all three samples")
    finally:
        reader.close()
        writer.close()
    assert reader.handler_errors == 1 and "expected 1004" in reader.last_handler_error


def test_lowcmd_from_encoder_moves_a_joint_to_its_target(dds_domain, lowcmd_pub, robot):
    encoder = SdkLowCmdEncoder()
    target = command(robot, m18=1.0)
    with running_sim(dds_domain, command_timeout_s=0.5) as sim:  # tolerate stalls of this busy process
        log = LowStateLog()
        stream(lowcmd_pub, lambda: [lambda: lowcmd_pub.Write(encoder.encode(target, MODE_MACHINE))], 1.5)
        final = log.states()[-1]
        log.close()
        counters = sim.stats()["commands"]
    print(f"\n  left elbow: target 1.000 rad, reached {final.q[LEFT_ELBOW]:.3f} rad; commands {counters}")
    assert final.q[LEFT_ELBOW] == pytest.approx(1.0, abs=0.05)
    assert counters["applied"] == counters["accepted"] == counters["received"] > 50
    assert counters["rejected_bad_crc"] == counters["malformed"] == 0


def test_bad_crc_malformed_and_wrong_mode_machine_are_counted_never_applied(dds_domain, lowcmd_pub, robot):
    sdk_crc = CRC()
    encoder = SdkLowCmdEncoder()
    hold = command(robot)

    def bad_crc() -> None:  # a valid elbow command, then tampered: CRC no longer matches
        msg = SdkLowCmdEncoder().encode(command(robot, m18=1.5), MODE_MACHINE)
        msg.motor_cmd[LEFT_ELBOW].kp = 200.0
        lowcmd_pub.Write(msg)

    def nan_with_valid_crc() -> None:
        msg = unitree_hg_msg_dds__LowCmd_()
        msg.mode_machine = MODE_MACHINE
        for motor in msg.motor_cmd[:NUM_MOTORS]:
            motor.mode, motor.q, motor.kp, motor.kd = 1, 1.5, 60.0, 1.0
        msg.motor_cmd[LEFT_ELBOW].q = float("nan")
        msg.crc = sdk_crc.Crc(msg)
        lowcmd_pub.Write(msg)

    def wrong_mode_machine() -> None:
        lowcmd_pub.Write(SdkLowCmdEncoder().encode(command(robot, m18=1.5), MODE_MACHINE + 1))

    # Cyclone refuses to send short samples; one with trailing bytes gets through
    too_long = LOWCMD_WIRE.to_cdr(lowcmd_record(encoder.encode(command(robot, m18=1.5), MODE_MACHINE))) + bytes(8)
    raw_writer = RawWriter("rt/lowcmd", LowCmd_)

    with running_sim(dds_domain, command_timeout_s=0.5) as sim:  # tolerate stalls of this busy process
        log = LowStateLog()
        stream(lowcmd_pub, lambda: [lambda: lowcmd_pub.Write(encoder.encode(hold, MODE_MACHINE))], 0.5)
        before = dict(sim.stats()["commands"])
        periods = stream(
            lowcmd_pub,
            lambda: [
                lambda: lowcmd_pub.Write(encoder.encode(hold, MODE_MACHINE)),
                bad_crc, nan_with_valid_crc, wrong_mode_machine, lambda: raw_writer.write(too_long),
            ],
            0.6,
        )
        time.sleep(0.05)
        after = sim.stats()["commands"]
        elbow = np.array([s.q[LEFT_ELBOW] for s in log.states()[-300:]])
        log.close()
    raw_writer.close()
    delta = {k: after[k] - before[k] for k in ("received", "accepted", "applied", "rejected_bad_crc", "malformed",
                                               "wrong_mode_machine")}
    print(f"\n  {periods} periods of 1 valid + 4 bad LowCmds: {delta}; last problem: {after['last_problem']!r}")
    assert delta["rejected_bad_crc"] == periods
    assert delta["malformed"] == 2 * periods  # NaN target and oversized payload
    assert delta["wrong_mode_machine"] == periods
    assert delta["accepted"] == delta["applied"] == periods
    assert delta["received"] == 5 * periods
    assert np.abs(elbow - robot.default_q[LEFT_ELBOW]).max() < 0.1  # held: never moved towards 1.5


SENDER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from unitree_sdk2py.core.channel import ChannelPublisher
    from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_
    from asap_ros.config.robot import load_robot_model
    from asap_ros.core.state import JointCommand
    from asap_ros.g1.sdk import SdkLowCmdEncoder
    from asap_ros.runtime import dds

    dds.init_channels(int(sys.argv[1]), "lo")
    robot = load_robot_model()
    publisher = ChannelPublisher("rt/lowcmd", LowCmd_)
    publisher.Init()
    encoder = SdkLowCmdEncoder()
    cmd = JointCommand(q=np.array(robot.default_q), kp=np.array(robot.kp), kd=np.array(robot.kd))
    print("sending", flush=True)
    while True:
        publisher.Write(encoder.encode(cmd, 5))
        time.sleep(0.02)
    """
)


def test_motors_go_limp_when_the_sender_is_killed(dds_domain, lowcmd_pub):
    with running_sim(dds_domain) as sim:
        sender = subprocess.Popen(dying_with_this_process([sys.executable, "-c", SENDER, str(dds_domain)]), cwd=REPO,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert sender.stdout.readline().strip() == "sending", sender.stderr.read()
            wait_for(lambda: sim.gate.applied > 20, 5.0, "commands from the sender")
            log = LowStateLog()
            wait_for(lambda: len(log.samples) > 5, 2.0, "LowStates")
            assert log.states()[-1].tau_est.any()  # holding the pose
            assert sim.gate.limp_events == 0
            sender.send_signal(signal.SIGKILL)
            killed = time.monotonic()
        finally:
            sender.kill()
            sender.wait()
        wait_for(lambda: sim.gate.limp_events > 0, 3.0, "the motors to go limp")
        noticed = time.monotonic() - killed
        time.sleep(0.05)
        after = log.states()[-1]
        log.close()
        limp_after_s = sim.gate.last_limp_after_s
    timeout = load_sim_config().command_timeout_s
    print(f"\n  sender SIGKILLed: limp {limp_after_s * 1e3:.1f} ms after its last command took effect "
          f"(command_timeout_s {timeout * 1e3:.0f} ms); observed {noticed * 1e3:.0f} ms after the kill")
    assert sim.gate.limp_events == 1
    assert limp_after_s >= timeout
    assert not after.tau_est.any()  # zero torque
    record = LOWSTATE_WIRE.from_cdr(log.samples[-1][0])
    assert not record["motor_state"]["mode"][:NUM_MOTORS].any()  # motors report off


def test_weak_knees_produce_less_knee_torque_than_nominal_for_the_same_command(dds_domain, lowcmd_pub, robot):
    encoder = SdkLowCmdEncoder()
    bend = command(robot, m3=1.2, m9=1.2)
    peaks = {}
    for profile in ("nominal", "weak_knees"):
        with running_sim(dds_domain, profile=profile) as sim:
            log = LowStateLog()
            stream(lowcmd_pub, lambda: [lambda: lowcmd_pub.Write(encoder.encode(bend, MODE_MACHINE))], 0.6)
            peaks[profile] = max(np.abs(s.tau_est[KNEES]).max() for s in log.states())
            log.close()
            assert sim.stats()["commands"]["applied"] > 10
    print(f"\n  peak knee tau_est for the same LowCmd: nominal {peaks['nominal']:.1f} N m, "
          f"weak_knees {peaks['weak_knees']:.1f} N m")
    assert peaks["nominal"] == pytest.approx(139.0, abs=0.01)  # float32 on the wire
    assert peaks["weak_knees"] == pytest.approx(0.6 * 139.0, abs=0.01)


def test_control_topic_lowers_and_releases_the_band(dds_domain, lowcmd_pub):
    ground_truth = GroundTruthLog()
    dp = participant()
    rogue = DataWriter(dp, Topic(dp, CONTROL_TOPIC, SimControl_), qos=CONTROL_QOS)
    client = SimControlClient()
    with running_sim(dds_domain) as sim:
        length = sim.physics.band.length
        client.send(BAND_LOWER, 0.2)
        wait_for(lambda: sim.controls_applied == 1, 2.0, "band_lower")
        assert sim.physics.band.length == pytest.approx(length + 0.2)
        rogue.write(SimControl_(action="band_cut", value=0.0))
        wait_for(lambda: sim.controls_rejected == 1, 2.0, "the unknown action to be rejected")
        assert "band_cut" in sim.last_control_problem
        client.send(BAND_RELEASE)
        wait_for(lambda: not sim.physics.band.enabled, 2.0, "band_release")
        released_at = sim.physics.time
        start_height = sim.physics.pelvis_pos()[2]
        time.sleep(0.5)
    client.close()
    close_entity(rogue)
    ground_truth.close()
    late = [gt for gt in ground_truth.samples if gt.sim_time > released_at + 0.1]
    assert late and not any(gt.band_enabled for gt in late)
    assert late[-1].pelvis_pos[2] < start_height - 0.05  # limp and unsupported: falling


def test_control_topic_sets_motor_error_bits_and_temperatures_seen_in_the_lowstate(dds_domain, lowcmd_pub):
    """The motor-health actions over rt/asap_sim/control, read back as the control loop reads
    rt/lowstate (PolledReader, the runtime's decoder)."""
    from asap_ros.sim.dds_types import MOTOR_ERROR, MOTOR_TEMPERATURE, MOTOR_TEMPERATURE_RELEASE

    client, reader = SimControlClient(), PolledReader("rt/lowstate", LowState_)

    def newest_state() -> RobotState:
        return decode_lowstate_cdr(*reader.next_arrival(1.0))

    try:
        with running_sim(dds_domain) as sim:
            client.send(MOTOR_ERROR, 0x8000, motor=KNEES[1])
            client.send(MOTOR_TEMPERATURE, 81.0, motor=KNEES[0])
            wait_for(lambda: sim.controls_applied == 2, 2.0, "the motor actions")
            state = newest_state()
            assert state.crc_ok and state.motor_error[KNEES[1]] == 0x8000 and state.motor_error.sum() == 0x8000
            assert state.temperature[KNEES[0]] == 81.0 and state.temperature[KNEES[1]] < 50.0
            client.send(MOTOR_ERROR, 0, motor=KNEES[1])
            client.send(MOTOR_TEMPERATURE_RELEASE, motor=-1)
            client.send(MOTOR_ERROR, 1, motor=40)  # refused: no such motor
            wait_for(lambda: sim.controls_applied == 4 and sim.controls_rejected == 1, 2.0, "clearing them")
            state = newest_state()
            assert not state.motor_error.any() and state.temperature.max() < 50.0
            assert "motor must be 0..28, got 40" in sim.last_control_problem
    finally:
        client.close()
        reader.close()


def test_mocap_publishes_pelvis_pose_stamped_at_capture(dds_domain, lowcmd_pub):
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=dds_domain, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("test_mocap_listener", context=context)
    received: list[tuple[PoseStamped, int]] = []
    node.create_subscription(PoseStamped, "mocap/pose", lambda msg: received.append((msg, time.time_ns())), 50)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    mocap = dataclasses.replace(load_sim_config().mocap, rate_hz=200.0, latency_ms=10.0, position_noise_m=0.001,
                                dropout=0.1)
    try:
        with running_sim(dds_domain, mocap=mocap) as sim:
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                executor.spin_once(timeout_sec=0.05)
            truth = sim.physics.pelvis_pos()
            stats = sim.stats()["mocap"]
    finally:
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
    stamps_ns = np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m, _ in received])
    delays_ms = (np.array([arrival for _, arrival in received]) - stamps_ns) / 1e6
    print(f"\n  mocap: {len(received)} poses in 1.5 s, capture->receive p50 {np.median(delays_ms):.1f} ms "
          f"(latency 10 ms), stats {stats}")
    assert len(received) > 50
    assert stats["dropped"] > 0
    assert 0 <= stats["captured"] - stats["dropped"] - stats["published"] <= 3  # in flight (10 ms) at stop
    assert all(m.header.frame_id == "world" for m, _ in received)
    assert (delays_ms >= 9.99).all()  # published no earlier than capture + latency
    assert (np.diff(stamps_ns) > 0).all()
    last = received[-1][0].pose
    assert np.linalg.norm([last.position.x - truth[0], last.position.y - truth[1], last.position.z - truth[2]]) < 0.02
    assert np.linalg.norm([last.orientation.w, last.orientation.x, last.orientation.y, last.orientation.z]) == (
        pytest.approx(1.0)
    )


def test_asap_sim_command_runs_and_reports(tmp_path):
    domain = DOMAINS + 1 + os.getpid() % 10  # its own domain (91..100), outside the fixtures' 1..90
    stats_path = tmp_path / "stats.json"
    result = subprocess.run(
        [sys.executable, "-m", "asap_ros.sim.main", "--domain", str(domain), "--duration", "2",
         "--mocap-rate", "0", "--profile", "worn", "--stats-json", str(stats_path)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "profile worn" in result.stderr
    stats = json.loads(stats_path.read_text())
    assert stats == json.loads(result.stdout)
    print(f"\n  asap_sim 2 s: real-time factor {stats['real_time_factor']:.3f}, step cost p50 "
          f"{stats['step_cost_us']['p50']:.0f} us p99 {stats['step_cost_us']['p99']:.0f} us, "
          f"{stats['lowstates_published']} LowStates, {stats['resyncs']} resyncs")
    assert stats["profile"] == "worn" and stats["steps"] > 500
    assert stats["commands"]["received"] == 0 and stats["commands"]["limp_events"] == 0


def test_a_stopped_simulator_reports_the_stall_and_where_its_time_went(dds_domain, tmp_path):
    from asap_ros.sim.stalls import STALL_MARK
    from asap_ros.testing.sim_process import SimProcess, stall_report

    init_channels(dds_domain)
    sim = SimProcess(dds_domain, tmp_path)
    sim.start()
    try:
        time.sleep(0.3)
        os.kill(sim.pid, signal.SIGSTOP)  # the whole process off the CPU: its physics thread not runnable
        time.sleep(0.15)
        os.kill(sim.pid, signal.SIGCONT)
        time.sleep(0.3)
    finally:
        sim.stop()
    stalls = sim.stats()["stalls"]
    assert stalls["note"] is None and stalls["count"] >= 1, stalls
    longest = stalls["longest"]
    assert longest["gap_ms"] >= 140.0, longest
    assert longest["other_ms"] >= 100.0 and longest["on_cpu_ms"] < 40.0, longest  # stopped, not running
    report = stall_report()
    assert str(sim.log_path) in report and STALL_MARK in report, report
    print(f"\n  {report.splitlines()[-1]}")


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--profile", "no_such_profile"], "no_such_profile.yaml"),
        (["--rate", "300", "--lowstate-rate", "200"], "lowstate_rate_hz"),
        (["--viewer", "--mocap-rate", "0"], "DISPLAY"),
    ],
)
def test_asap_sim_bad_input_is_a_one_line_error(capsys, monkeypatch, args, names):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert sim_main(["--domain", "7", *args]) == 2  # refused before any DDS set-up
    err = capsys.readouterr().err
    assert err.startswith("asap_sim: error: ") and names in err and err.count("\n") == 1
