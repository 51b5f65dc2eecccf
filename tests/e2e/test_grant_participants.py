"""Grants over real Cyclone DDS on loopback: the deploy node's arbiter tells the participant
that wrote each one, obeys the first supervisor's and ignores a grant in its name from another
(the lease cap and the rest of the rule: tests/core/test_lease_findings.py)."""

from __future__ import annotations

import subprocess
import sys
import time

from asap_ros.runtime.arbitration import LowCmdArbiter
from asap_ros.runtime.dds import init_channels

FORGER = """
import sys, time
from cyclonedds._clayer import ddspy_write
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.topic import Topic
from asap_ros.core.lease import Grant, Supervision
from asap_ros.runtime.arbitration import GRANT_QOS, GRANT_TOPIC, SupervisorGrant_, encode_grant
from asap_ros.runtime import dds

domain, session = int(sys.argv[1]), int(sys.argv[2])
dds.init_channels(domain, "lo")
writers = []
for dp in (dds.participant(), DomainParticipant(domain)):  # the supervisor's, then another one's
    writers.append(DataWriter(dp, Topic(dp, GRANT_TOPIC, SupervisorGrant_), qos=GRANT_QOS))
time.sleep(1.5)  # matched by the reader meanwhile
for writer, lease_ns in zip(writers, (150_000_000, 10_000_000_000)):
    ddspy_write(writer._ref, encode_grant(Grant(Supervision.WATCHING, 0x51, session, 1, lease_ns, "")))  # as RawWriter
    time.sleep(0.03)  # well within the first one's 150 ms lease: the supervisor is not silent
time.sleep(1.0)
"""


def test_a_grant_in_the_supervisors_name_from_another_participant_is_ignored(dds_domain) -> None:
    init_channels(dds_domain, "lo")
    arbiter = LowCmdArbiter(period_ns=20_000_000)
    try:
        forger = subprocess.Popen([sys.executable, "-c", FORGER, str(dds_domain), str(arbiter.lease.session)])
        began = time.monotonic_ns()
        arbiter.lease.beat(1, began)
        until = time.monotonic() + 15.0
        while arbiter.lease.forged_grants == 0 and time.monotonic() < until:
            arbiter.verdict(time.monotonic_ns())
            time.sleep(0.01)
        forger.wait(30)
        obeyed = arbiter.lease.obeyed_participant
        assert obeyed is not None and len(obeyed) == 16 and obeyed != bytes(16), obeyed
        assert arbiter.malformed_grants == 0
        assert arbiter.lease.forged_grants == 1, "the second participant's grant was not told apart"
    finally:
        arbiter.close()
