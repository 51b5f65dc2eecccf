"""Deploy beats over real Cyclone DDS on loopback: the supervisor's reader keeps every process's."""

from __future__ import annotations

import time

from asap_ros.core.lease import Beat, BeatFlag
from asap_ros.core.state_machine import Mode
from asap_ros.runtime.arbitration import BEAT_QOS, BEAT_TOPIC, DeployBeat_, decode_beat, encode_beat
from asap_ros.runtime.dds import RawReader, RawWriter, init_channels


def test_beats_of_two_processes_sent_at_once_all_wait_for_the_reader(dds_domain) -> None:
    """Two deploy processes stepping on the same grid beat within microseconds; the topic has no
    key, so their beats share one history. Written before the reader takes any (its thread not
    yet started), every beat of both must still be there when it does."""
    init_channels(dds_domain, "lo")
    heard: list[Beat] = []
    reader = RawReader(BEAT_TOPIC, DeployBeat_, lambda payload, *_: heard.append(decode_beat(payload)), qos=BEAT_QOS,
                       start=False)  # fmt: skip
    writers = [RawWriter(BEAT_TOPIC, DeployBeat_, BEAT_QOS) for _ in range(2)]
    try:
        until = time.monotonic() + 10.0
        while any(writer.matched() < 1 for writer in writers):
            assert time.monotonic() < until, "the beat writers never matched the reader"
            time.sleep(0.01)
        for seq in (1, 2, 3):
            for session, writer in zip((11, 22), writers):
                writer.write(encode_beat(Beat(session, seq, Mode.HOLD, 0, BeatFlag.WRITING, 100 + session, 7)))
        time.sleep(0.2)  # delivered into the reader's history; nothing taken yet
        reader.start()
        until = time.monotonic() + 5.0
        while len(heard) < 6 and time.monotonic() < until:
            time.sleep(0.01)
        time.sleep(0.1)
        assert sorted((beat.session, beat.seq) for beat in heard) == [(11, 1), (11, 2), (11, 3), (22, 1), (22, 2), (22, 3)]
    finally:
        reader.close()
        for writer in writers:
            writer.close()
