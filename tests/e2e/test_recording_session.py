"""A recorded session end to end: ``asap_recorder`` (subprocess) records ~20 s published by the
G1/runtime stand-in (tests/session_publisher.py, subprocess): LowState/LowCmd at 500 Hz on
Cyclone DDS, policy steps at 50 Hz, mocap at 200 Hz and odometry/diagnostics over rclpy.

Every published message must be in the bag, and both rosbags and the independent mcap reader
(mcap-ros2-support's decoder) must give back every value exactly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader

from asap_ros.recording import topics as T
from asap_ros.recording.typestore import recording_typestore
from asap_ros.runtime.domains import domain_beside
from asap_ros.sim.process import dying_with_this_process
from asap_ros.testing import session_publisher as stand_in

DURATION_S = 20.0


def recorder_command(domain: int, output: Path, name: str, *params: str) -> list[str]:
    params = (f"dds_domain:={domain}", f"output_dir:={output}", f"bag_name:={name}", *params)
    return dying_with_this_process(
        [sys.executable, "-m", "asap_ros.ros.recorder_node", "--ros-args", *sum((["-p", p] for p in params), [])])


def publisher_command(domain: int, duration_s: float, counts: Path) -> list[str]:
    return dying_with_this_process([sys.executable, "-m", "asap_ros.testing.session_publisher", "--domain",
                                    str(domain), "--duration", str(duration_s), "--counts", str(counts)])


@dataclass
class RecordedSession:
    bag: Path
    published: dict[str, int]
    publisher_report: dict[str, Any]
    recorder_exit: int
    recorder_log: str


@pytest.fixture(scope="module")
def session(tmp_path_factory, dds_domain) -> RecordedSession:
    # A domain of the session's own (recorder and publisher are both processes). The recorder's Fast
    # DDS runs over UDP only, as every node's does (asap_ros.ros.fastdds): stale shared-memory
    # segments that killed nodes leave in /dev/shm can keep samples from a matched reader.
    dds_domain = domain_beside(dds_domain, 76)
    work = tmp_path_factory.mktemp("session")
    env = {**os.environ, "ROS_DOMAIN_ID": str(dds_domain)}
    log = work / "recorder.log"
    with log.open("w") as log_stream:
        recorder = subprocess.Popen(
            recorder_command(dds_domain, work, "bag", "flush_period_s:=0.2", "min_free_mb:=1.0",
                             "operator_notes:=end-to-end test"),
            env=env, stdout=log_stream, stderr=subprocess.STDOUT,
        )
        publisher = subprocess.Popen(publisher_command(dds_domain, DURATION_S, work / "counts.json"), env=env,
                                     stdout=subprocess.PIPE, text=True)
        try:
            assert publisher.stdout.readline().strip() == "publishing"
            assert publisher.wait(timeout=DURATION_S + 90) == 0
            recorder.send_signal(signal.SIGINT)
            exit_code = recorder.wait(timeout=30)
        finally:
            for process in (publisher, recorder):
                if process.poll() is None:
                    process.kill()
                    process.wait()
    report = json.loads((work / "counts.json").read_text())
    return RecordedSession(work / "bag", report.pop("counts"), report, exit_code, log.read_text())


def check_values(messages: Iterable[tuple[str, Any]]) -> dict[str, list]:
    """Check each message against what the stand-in published; returns each topic's indices."""
    indices: dict[str, list] = defaultdict(list)
    for topic, msg in messages:
        if topic == T.LOWSTATE:
            index = int(msg.tick)
            q = np.array([m.q for m in msg.motor_state[:29]], dtype=np.float32)
            np.testing.assert_array_equal(q, stand_in.expected_motor_q(index))
            assert list(msg.version) == [1, 7] and msg.mode_machine == 5
        elif topic == T.LOWCMD:
            q = np.array([m.q for m in msg.motor_cmd[:29]], dtype=np.float32)
            index = round(float(q[0]) * 1e4)
            np.testing.assert_array_equal(q, stand_in.expected_motor_q(index))
            assert [m.mode for m in msg.motor_cmd[:29]] == [1] * 29
        elif topic == T.POLICY_STEP:
            index = int(msg.control_tick)
            np.testing.assert_array_equal(np.asarray(msg.obs, np.float32), stand_in.expected_obs(index))
            np.testing.assert_array_equal(np.asarray(msg.raw_action, np.float32), stand_in.expected_raw_action(index))
            np.testing.assert_array_equal(np.asarray(msg.q_target, np.float32), stand_in.expected_q_target(index))
            assert msg.lowstate_tick == index * 10 and msg.late == (index % 97 == 0)
            assert msg.stamp_ns - msg.lowstate_stamp_ns == 3_000_000 and msg.latency_ns == 3_000_000
        elif topic == T.TRANSITION:
            index = (msg.from_mode, msg.to_mode, msg.reason)
        elif topic in (T.MOCAP_POSE, T.MOCAP_ODOMETRY):
            pose = msg.pose if topic == T.MOCAP_POSE else msg.pose.pose
            index = round(pose.position.x * 1e3)
            assert pose.position.x == stand_in.expected_pose_x(index)
        elif topic == T.DIAGNOSTICS:
            for status in msg.status:
                indices[f"{T.DIAGNOSTICS} {status.name}"].append(status.message if status.name == "asap_recorder"
                                                                 else int(status.message))
            continue
        else:
            index = msg
        indices[topic].append(index)
    return indices


def check_complete(indices: dict[str, list], published: dict[str, int], report: dict[str, Any]) -> None:
    """``report``: the stand-in's matched readers and delivery checks, said when a topic is short."""
    for topic in (T.LOWSTATE, T.LOWCMD, T.POLICY_STEP, T.MOCAP_POSE, T.MOCAP_ODOMETRY):
        assert sorted(indices[topic]) == list(range(published[topic])), (topic, report)
    diagnostics = sorted(indices[f"{T.DIAGNOSTICS} {stand_in.STAND_IN_NAME}"])
    assert diagnostics == list(range(published[T.DIAGNOSTICS])), report
    assert indices[T.TRANSITION] == [t[1:] for t in stand_in.TRANSITIONS]


def test_recorder_stops_cleanly(session):
    assert session.recorder_exit == 0, session.recorder_log
    assert "closed" in session.recorder_log


def test_every_published_message_is_in_the_bag_and_rosbags_reads_it_exactly(session):
    store = recording_typestore()
    with Reader(session.bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        indices = check_values((c.topic, store.deserialize_cdr(raw, c.msgtype)) for c, _, raw in reader.messages())
        custom = reader.storage.metadata.custom
    for topic in (T.LOWSTATE, T.LOWCMD, T.POLICY_STEP, T.TRANSITION, T.MOCAP_POSE, T.MOCAP_ODOMETRY):
        assert counts[topic] == session.published[topic], topic
    check_complete(indices, session.published, session.publisher_report)
    probes = indices[f"{T.DIAGNOSTICS} {stand_in.PROBE_NAME}"]
    assert set(range(stand_in.PROBE_BURST)) <= set(probes), "the stand-in's delivery probes are in the bag"

    episodes = indices[T.EPISODE]
    assert [(e.index, e.motion, e.end_mode, e.estop, e.complete) for e in episodes] == [
        (1, "kick_level1", "HOLD", False, True), (2, "kick_level1", "DAMPING", True, True)]
    assert episodes[1].end_reason == "operator e-stop"
    assert json.loads(indices[T.SESSION][-1].data)["robot"] == {"version": "1.7", "mode_machine": "5"}
    assert indices[f"{T.DIAGNOSTICS} asap_recorder"], "the recorder reports its status on diagnostics"
    assert custom["asap_ros.operator_notes"] == "end-to-end test"
    assert {p["name"] for p in json.loads(custom["asap_ros.policies"])} == {"kick_level1", "CR7_level1", "APT_level1"}


def test_mcap_reader_reads_every_message_and_decodes_them(session):
    """Every message's bytes equal what rosbags read; every message is decoded by mcap-ros2-support's
    decoder and checked, except LowState/LowCmd, of which every 25th is (its pure-Python decoder
    needs ~2 ms per hg message; test_recording_types checks it on every field of these types)."""
    with Reader(session.bag) as reader:
        expected = sorted((c.topic, t, bytes(raw)) for c, t, raw in reader.messages())
    got, decoded = [], []
    seen: dict[str, int] = defaultdict(int)
    factory = DecoderFactory()
    for path in sorted(session.bag.glob("*.mcap")):
        with path.open("rb") as stream:
            reader = make_reader(stream)
            assert reader.get_header().profile == "ros2"
            for schema, channel, message in reader.iter_messages():
                got.append((channel.topic, message.log_time, bytes(message.data)))
                seen[channel.topic] += 1
                if channel.topic not in (T.LOWSTATE, T.LOWCMD) or seen[channel.topic] % 25 == 0:
                    decode = factory.decoder_for(channel.message_encoding, schema)
                    decoded.append((channel.topic, decode(message.data)))
    assert sorted(got) == expected
    indices = check_values(decoded)
    for topic in (T.POLICY_STEP, T.MOCAP_POSE, T.MOCAP_ODOMETRY):
        assert sorted(indices[topic]) == list(range(session.published[topic])), topic
    assert indices[T.TRANSITION] == [t[1:] for t in stand_in.TRANSITIONS]
    assert len(indices[T.LOWSTATE]) >= session.published[T.LOWSTATE] // 50


def test_bag_info_reports_topics_episodes_and_sync(session, capsys):
    from asap_ros.cli import main

    assert main(["bag", "info", "--json", str(session.bag)]) == 0
    info = json.loads(capsys.readouterr().out)
    topics = {t["name"]: t for t in info["topics"]}
    assert topics[T.LOWSTATE]["count"] == session.published[T.LOWSTATE]
    assert 300 < topics[T.LOWSTATE]["rate_hz"] < 700 and topics[T.LOWSTATE]["max_gap_ms"] > 0
    assert [(e["index"], e["end_mode"], e["estop"]) for e in info["episodes"]] == [(1, "HOLD", False), (2, "DAMPING", True)]
    sync = info["sync"]
    assert sync["policy_steps"] == session.published[T.POLICY_STEP]
    assert sync["lowstate_age_ms"]["p50"] == pytest.approx(3.0) and sync["mocap_age_ms"]["max"] == pytest.approx(5.0)
    assert sync["late_steps"] == len(range(0, session.published[T.POLICY_STEP], 97))
    assert main(["bag", "info", str(session.bag)]) == 0
    text = capsys.readouterr().out
    assert "E-STOP" in text and "LowState age" in text
