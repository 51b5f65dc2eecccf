"""Client for a running simulator's control topic (band lower/raise/release/attach)."""

from __future__ import annotations

import time

from cyclonedds.core import Policy
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Qos
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from asap_ros.core.errors import AsapError
from asap_ros.runtime.dds import close_entity, participant
from asap_ros.sim.dds_types import CONTROL_ACTIONS, CONTROL_TOPIC, SimControl_

CONTROL_QOS = Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.History.KeepLast(16))


class SimControlClient:
    """Sends :class:`SimControl_` requests; call :func:`asap_ros.runtime.dds.init_channels` first."""

    def __init__(self) -> None:
        dp = participant()
        self._writer = DataWriter(dp, Topic(dp, CONTROL_TOPIC, SimControl_), qos=CONTROL_QOS)

    def send(self, action: str, value: float = 0.0, wait_for_sim_s: float = 2.0) -> None:
        """Send one request, waiting up to ``wait_for_sim_s`` for a simulator to listen."""
        if action not in CONTROL_ACTIONS:
            raise AsapError(f"unknown simulator action {action!r} (known: {', '.join(CONTROL_ACTIONS)})")
        deadline = time.monotonic() + wait_for_sim_s
        while not self._writer.get_matched_subscriptions():
            if time.monotonic() > deadline:
                raise AsapError(f"no simulator listens on {CONTROL_TOPIC} (waited {wait_for_sim_s:g} s)")
            time.sleep(0.02)
        self._writer.write(SimControl_(action=action, value=float(value)))

    def close(self) -> None:
        close_entity(self._writer)
