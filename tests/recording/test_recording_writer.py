"""Bag writing without DDS: file splitting, episodes, session data, disk guard, settings."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.interfaces import QosDurability
from rosbags.rosbag2 import Reader

from asap_ros.config.paths import policies_dir
from asap_ros.core.errors import AsapError, ConfigError
from asap_ros.g1.layout import LOWSTATE_LAYOUT, LOWSTATE_WIRE
from asap_ros.recording import topics as T
from asap_ros.recording.bag_writer import BagWriter, SplitPolicy
from asap_ros.recording.config import RecorderConfig, load_recorder_config
from asap_ros.recording.episodes import EpisodeTracker
from asap_ros.recording.recorder import Recorder, RecorderState
from asap_ros.recording.session_info import SessionInfo, describe_policies
from asap_ros.recording.typestore import recording_typestore
from asap_ros.runtime.step_topics import ModeTransition_

TOPICS = [*T.DDS_TOPICS.values(), *T.RECORDER_TOPICS]


def lowstate(tick: int) -> bytes:
    record = np.zeros((), dtype=LOWSTATE_LAYOUT)
    record["tick"] = tick
    record["version"] = (3, 9)
    record["mode_machine"] = 6
    record["motor_state"]["q"][:29] = np.arange(29) * 0.5 + tick
    return LOWSTATE_WIRE.to_cdr(record)


def transition(stamp_ns: int, from_mode: str, to_mode: str, reason: str = "r", motion: str = "kick") -> bytes:
    return ModeTransition_(stamp_ns, from_mode, to_mode, reason, motion).serialize()


def test_split_bag_reads_back_completely_with_rosbags_and_mcap(tmp_path):
    bag = tmp_path / "split"
    writer = BagWriter(bag, TOPICS, compression="none", split=SplitPolicy(max_bytes=50_000), custom_data={"k": "v"})
    sent = []
    for tick in range(200):
        data = lowstate(tick)
        writer.write(T.LOWSTATE, 1_000_000_000 + tick * 2_000_000, data)
        sent.append(data)
        if tick % 10 == 9:
            writer.flush()
    summary = writer.close()
    assert len(summary.files) > 2, "50 kB files of 2 kB messages flushed every 20 kB must split"
    assert summary.topic_counts[T.LOWSTATE] == 200

    with Reader(bag) as reader:
        got = [(t, raw) for _, t, raw in reader.messages()]
        assert reader.message_count == 200
    assert [raw for _, raw in got] == sent
    assert [t for t, _ in got] == [1_000_000_000 + i * 2_000_000 for i in range(200)]

    decoded = []
    for name in (f.name for f in summary.files):
        with (bag / name).open("rb") as stream:
            reader = make_reader(stream, decoder_factories=[DecoderFactory()])
            assert [m.metadata for m in reader.iter_metadata()][0] == {"k": "v"}
            decoded += [msg.tick for _, _, _, msg in reader.iter_decoded_messages()]
    assert decoded == list(range(200))


def test_writer_refuses_an_existing_bag_and_unknown_topics(tmp_path):
    writer = BagWriter(tmp_path / "b", TOPICS)
    with pytest.raises(AsapError, match="exists already"):
        BagWriter(tmp_path / "b", TOPICS)
    with pytest.raises(AsapError, match="'/nope' is not one of this bag's topics"):
        writer.write("/nope", 1, b"\x00\x01\x00\x00")
    writer.close()


@pytest.mark.parametrize(
    "sequence, expected",
    [
        # (from, to) pairs -> (end_mode, estop, complete) per episode
        ([("HOLD", "PREPARE"), ("PREPARE", "TRACKING"), ("TRACKING", "HOLD")], [("HOLD", False, True)]),
        ([("PREPARE", "TRACKING"), ("TRACKING", "DAMPING")], [("DAMPING", True, True)]),
        ([("PREPARE", "TRACKING"), ("TRACKING", "HOLD"), ("HOLD", "PREPARE"), ("PREPARE", "TRACKING")],
         [("HOLD", False, True), ("", False, False)]),
        ([("PREPARE", "HOLD"), ("HOLD", "DAMPING")], []),
        ([("PREPARE", "TRACKING"), ("PREPARE", "TRACKING")], [("", False, False), ("", False, False)]),
    ],
)
def test_episode_tracker(sequence, expected):
    tracker = EpisodeTracker()
    episodes = []
    for stamp, (from_mode, to_mode) in enumerate(sequence):
        ended = tracker.on_transition(stamp, from_mode, to_mode, f"{from_mode}->{to_mode}", "kick")
        episodes += [ended] if ended else []
    cut = tracker.cut(len(sequence), "recording stopped")
    episodes += [cut] if cut else []
    assert [(e.end_mode, e.estop, e.complete) for e in episodes] == expected
    assert [e.index for e in episodes] == list(range(1, len(expected) + 1))


def in_process_config(tmp_path: Path, **overrides) -> RecorderConfig:
    return RecorderConfig(output_dir=tmp_path, bag_name="session", flush_period_s=0.05, **overrides)


def test_in_process_recorder_marks_episodes_and_describes_the_session(tmp_path, assets):
    session = SessionInfo(policies=describe_policies([policies_dir() / "kick_level1.yaml"]), operator_notes="dry run")
    recorder = Recorder(in_process_config(tmp_path), session)
    bag = recorder.start(dds=False)
    t0 = time.time_ns()  # after the first /asap/session message, before the stop
    recorder.submit(T.LOWSTATE, t0, lowstate(0))
    for i, (from_mode, to_mode) in enumerate([("HOLD", "PREPARE"), ("PREPARE", "TRACKING"), ("TRACKING", "DAMPING"),
                                               ("DAMPING", "PASSIVE"), ("PREPARE", "TRACKING")]):
        recorder.submit(T.TRANSITION, t0 + i + 1, transition(t0 + i, from_mode, to_mode, reason=f"#{i}"))
    recorder.submit(T.TRANSITION, t0 + 9, b"\x00\x01\x00\x00garbage")  # stored, not understood
    with pytest.raises(AsapError, match="'/other' is not recorded"):
        recorder.submit("/other", t0, b"")
    summary = recorder.stop()
    assert recorder.status().undecodable == 1 and summary.topic_counts[T.TRANSITION] == 6
    assert recorder.status().state is RecorderState.STOPPED
    assert summary.topic_counts[T.EPISODE] == 2

    store = recording_typestore()
    with Reader(bag) as reader:
        custom = reader.storage.metadata.custom
        latched = {c.topic for c in reader.connections
                   if any(q.durability == QosDurability.TRANSIENT_LOCAL for q in c.ext.offered_qos_profiles)}
        episodes = [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages()
                    if c.topic == T.EPISODE]
        sessions = [json.loads(store.deserialize_cdr(raw, c.msgtype).data) for c, _, raw in reader.messages()
                    if c.topic == T.SESSION]
    assert [(e.index, e.end_mode, e.end_reason, e.estop, e.complete) for e in episodes] == [
        (1, "DAMPING", "#2", True, True), (2, "", "recording stopped", False, False)]
    assert latched == {T.SESSION}, "the session description is offered latched"
    assert sessions[0]["robot"] == {} and sessions[-1]["robot"] == {"version": "3.9", "mode_machine": "6"}
    assert custom["asap_ros.robot.version"] == "3.9" and custom["asap_ros.operator_notes"] == "dry run"
    policy = json.loads(custom["asap_ros.policies"])[0]
    assert policy["name"] == "kick_level1" and len(policy["actor_sha256"]) == 64 and policy["clip_file"].endswith(".pkl")


def test_disk_guard_stops_recording_cleanly_with_a_fault(tmp_path):
    faults = []
    recorder = Recorder(in_process_config(tmp_path, min_free_bytes=10**18), on_fault=faults.append)
    bag = recorder.start(dds=False)
    recorder.submit(T.LOWSTATE, 1, lowstate(1))
    recorder.submit(T.TRANSITION, 2, transition(2, "PREPARE", "TRACKING"))
    deadline = time.monotonic() + 10
    while recorder.status().state is RecorderState.RECORDING and time.monotonic() < deadline:
        time.sleep(0.01)  # the first flush (every 50 ms) checks the free space
    status = recorder.status()
    assert status.state is RecorderState.FAULT and status.diagnostic_level == 2
    assert faults == [status.fault] and "below the recorder's floor of 1000000000000.0 MB" in status.fault
    recorder.submit(T.LOWSTATE, 3, lowstate(3))
    assert recorder.status().discarded == 1
    summary = recorder.stop()
    assert summary is not None
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        episode = [recording_typestore().deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages()
                   if c.topic == T.EPISODE]
    assert counts[T.LOWSTATE] == 1 and counts[T.TRANSITION] == 1
    assert len(episode) == 1 and not episode[0].complete and "below the recorder's floor" in episode[0].end_reason


def test_package_recorder_config_is_valid():
    config = load_recorder_config()
    assert 0 < config.flush_period_s <= 1.0
    assert config.ros_topics["mocap_pose"] == "mocap/pose"


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("compression", "brotli", "compression: must be one of zstd, lz4, none"),
        ("flush_period_s", 2.0, "flush_period_s: out of range"),
        ("min_free_mb", -1.0, "min_free_mb: out of range"),
        ("unknown_key", 1, "unknown parameter"),
    ],
)
def test_bad_recorder_settings_name_key_and_value(tmp_path, key, value, message):
    import yaml

    from asap_ros.config.paths import config_file

    data = yaml.safe_load(config_file("recorder.yaml").read_text())
    data["asap_recorder"]["ros__parameters"][key] = value
    path = tmp_path / "recorder.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=message) as raised:
        load_recorder_config(path)
    assert str(path) in str(raised.value)
