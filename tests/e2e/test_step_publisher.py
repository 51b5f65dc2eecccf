"""The policy-step publisher on a real DDS participant."""

from __future__ import annotations

import numpy as np
import pytest


def test_policy_step_publisher_refuses_a_wrong_target_length(dds_domain):
    from asap_ros.runtime.dds import init_channels
    from asap_ros.runtime.step_topics import PolicyStepPublisher

    init_channels(dds_domain, "lo")
    publisher = PolicyStepPublisher()
    try:
        with pytest.raises(ValueError, match="q_target must have 29 values, got 23"):
            publisher.publish_step(
                stamp_ns=1, control_tick=1, mode="TRACKING", motion="m", episode=1, motion_tick=0, phase=0.0,
                lowstate_tick=1, lowstate_stamp_ns=1, mocap_stamp_ns=0, obs=np.zeros(380), raw_action=np.zeros(23),
                q_target=np.zeros(23), compute_ns=1, latency_ns=1, late=False,
            )
    finally:
        publisher.close()
