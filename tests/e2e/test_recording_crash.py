"""Crash safety: ``kill -9`` of a recording ``asap_recorder``, then reading and repairing its bag;
damaged and foreign files get a clear error and the original is never changed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from mcap.exceptions import EndOfFile
from mcap.reader import NonSeekingReader
from mcap.records import Chunk
from mcap.stream_reader import StreamReader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader
from test_recording_session import publisher_command, recorder_command

from asap_ros.core.errors import AsapError
from asap_ros.recording import topics as T
from asap_ros.recording.info import bag_info
from asap_ros.recording.mcap_scan import BagDamaged
from asap_ros.recording.repair import repair_bag, sha256_tree
from asap_ros.testing import session_publisher as stand_in

FLUSH_PERIOD_S = 0.2
PUBLISH_S = 30.0
"""Longer than the test needs: the publisher is stopped right after the kill."""
KILL_AFTER_S = 4.0


def stream_read(path: Path) -> tuple[list[tuple[str, int, bytes]], bool]:
    """Messages of one MCAP file read by mcap's streaming reader, and whether it hit the cut."""
    messages, cut = [], False
    with path.open("rb") as stream:
        try:
            for _, channel, message in NonSeekingReader(stream).iter_messages(log_time_order=False):
                messages.append((channel.topic, message.log_time, bytes(message.data)))
        except EndOfFile:
            cut = True
    return messages, cut


@pytest.fixture(scope="module")
def killed(tmp_path_factory, dds_domain) -> tuple[Path, int]:
    """A bag whose recorder got SIGKILL mid-session, and the kill time (ns)."""
    work = tmp_path_factory.mktemp("killed")
    env = {**os.environ, "ROS_DOMAIN_ID": str(dds_domain)}
    recorder = subprocess.Popen(recorder_command(dds_domain, work, "bag", f"flush_period_s:={FLUSH_PERIOD_S}",
                                                 "min_free_mb:=1.0"),
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    publisher = subprocess.Popen(publisher_command(dds_domain, PUBLISH_S, work / "counts.json"), env=env,
                                 stdout=subprocess.PIPE, text=True)
    try:
        assert publisher.stdout.readline().strip() == "publishing"
        time.sleep(KILL_AFTER_S)
        kill_ns = time.time_ns()
        os.kill(recorder.pid, signal.SIGKILL)
        assert recorder.wait(timeout=10) == -signal.SIGKILL
    finally:
        for process in (recorder, publisher):
            if process.poll() is None:
                process.kill()
    return work / "bag", kill_ns


@pytest.fixture
def killed_copy(killed, tmp_path) -> Path:
    copy = tmp_path / "bag"
    shutil.copytree(killed[0], copy)
    return copy


def test_killed_bag_reads_with_the_mcap_streaming_reader_up_to_the_last_flush(killed):
    bag, kill_ns = killed
    assert not (bag / "metadata.yaml").exists()
    files = sorted(bag.glob("*.mcap"))
    messages = []
    for path in files:
        got, _ = stream_read(path)
        messages += got
    lowstates = [m for m in messages if m[0] == T.LOWSTATE]
    assert len(lowstates) > 500
    store_ticks = sorted(int.from_bytes(data[16:20], "little") for _, _, data in lowstates)  # LowState.tick
    assert store_ticks == list(range(len(lowstates))), "no holes: everything before the last flush is there"
    newest = max(t for _, t, _ in messages)
    assert kill_ns - newest < 1e9, f"lost {(kill_ns - newest) / 1e9:.2f} s before the kill"

    factory = DecoderFactory()  # and the messages decode with the embedded schemas
    with files[-1].open("rb") as stream:
        decoded = 0
        try:
            for schema, channel, message in NonSeekingReader(stream).iter_messages(log_time_order=False):
                if channel.topic == T.POLICY_STEP:
                    step = factory.decoder_for("cdr", schema)(message.data)
                    np.testing.assert_array_equal(np.asarray(step.obs, np.float32), stand_in.expected_obs(step.control_tick))
                    decoded += 1
        except EndOfFile:
            pass
    assert decoded > 50


def test_info_on_a_killed_bag_says_to_repair_it(killed, capsys):
    from asap_ros.cli import main

    with pytest.raises(AsapError, match="did not close this bag.*asap-ros bag repair"):
        bag_info(killed[0])
    assert main(["bag", "info", str(killed[0])]) == 2
    assert "asap-ros bag repair" in capsys.readouterr().err


def test_repair_to_a_new_location_recovers_everything_flushed_and_leaves_the_original(killed, tmp_path):
    bag = killed[0]
    before = sha256_tree(bag)
    flushed = sorted(m for path in sorted(bag.glob("*.mcap")) for m in stream_read(path)[0])
    result = repair_bag(bag, tmp_path / "repaired")
    assert sha256_tree(bag) == before
    assert any(f.action == "rebuilt" for f in result.files)
    with Reader(tmp_path / "repaired") as reader:
        recovered = sorted((c.topic, t, bytes(raw)) for c, t, raw in reader.messages())
        assert reader.storage.metadata.custom["asap_ros.robot.version"] == "1.7"
        session_qos = next(c for c in reader.connections if c.topic == T.SESSION).ext.offered_qos_profiles
        assert session_qos[0].depth == 1 and session_qos[0].durability.name == "TRANSIENT_LOCAL"
    assert recovered == flushed
    info = bag_info(tmp_path / "repaired")
    assert {t.name: t.count for t in info.topics}[T.LOWSTATE] == sum(1 for m in flushed if m[0] == T.LOWSTATE)


def test_repair_in_place_keeps_a_verified_copy(killed_copy):
    before = sha256_tree(killed_copy)
    result = repair_bag(killed_copy)
    assert result.backup == killed_copy.with_name("bag.orig")
    assert sha256_tree(result.backup) == before
    with Reader(killed_copy) as reader:
        assert reader.message_count == sum(result.topic_counts.values()) > 0
    assert "intact" in repair_bag(killed_copy).describe()


def chunk_spans(path: Path) -> list[tuple[int, int]]:
    """(start, end) byte offsets of every complete chunk record."""
    spans = []
    with path.open("rb") as stream:
        start = 8
        try:
            for record in StreamReader(stream, emit_chunks=True).records:
                if isinstance(record, Chunk):
                    spans.append((start, stream.tell()))
                start = stream.tell()
        except EndOfFile:
            pass
    return spans


def test_repair_skips_a_damaged_chunk_and_reports_it(killed_copy, tmp_path):
    path = sorted(killed_copy.glob("*.mcap"))[0]
    start, end = chunk_spans(path)[3]
    data = bytearray(path.read_bytes())
    data[(start + end) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    result = repair_bag(killed_copy, tmp_path / "repaired")
    outcome = result.files[0]
    assert len(outcome.lost_chunks) == 1 and outcome.action == "rebuilt"
    assert "1 damaged chunk(s) lost" in result.describe()
    with Reader(tmp_path / "repaired") as reader:
        assert reader.message_count == sum(result.topic_counts.values()) > 0


def test_truncated_closed_bag_gets_a_clear_error_then_repairs(killed, tmp_path):
    repair_bag(killed[0], tmp_path / "closed")
    path = sorted((tmp_path / "closed").glob("*.mcap"))[0]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(AsapError, match="cannot read the bag.*asap-ros bag repair"):
        bag_info(tmp_path / "closed")
    result = repair_bag(tmp_path / "closed", tmp_path / "again")
    assert result.files[0].action == "rebuilt" and result.files[0].discarded_bytes > 0
    assert bag_info(tmp_path / "again").message_count == sum(result.topic_counts.values())


@pytest.mark.parametrize("in_place", [False, True], ids=["to --out", "in place"])
def test_a_file_that_is_no_mcap_is_refused_and_left_untouched(tmp_path, in_place):
    bag = tmp_path / "bag"
    bag.mkdir()
    (bag / "bag_0.mcap").write_bytes(np.random.default_rng(0).bytes(4096))
    before = sha256_tree(bag)
    out = None if in_place else tmp_path / "out"
    with pytest.raises(BagDamaged, match="bag_0.mcap: not an MCAP file"):
        repair_bag(bag, out)
    assert sha256_tree(bag) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bag"], "no copy or partial output left behind"


def test_repair_of_something_that_is_no_bag(tmp_path):
    with pytest.raises(BagDamaged, match="no .mcap files"):
        repair_bag(tmp_path)
    with pytest.raises(BagDamaged, match="not a bag directory"):
        repair_bag(tmp_path / "missing")
