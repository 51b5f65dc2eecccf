"""Mocap: velocity estimate and the Vicon client on the SDK stand-in (the rclpy node: tests/e2e).

The Vicon server is the only thing replaced (it cannot exist here): ``vicon_standin`` serves
a known trajectory with occlusions and frame drops through the SDK's API.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from asap_ros.core.errors import AsapError, ConfigError
from asap_ros.mocap.velocity import VelocityEstimator
from asap_ros.mocap.vicon import import_vicon_sdk
from asap_ros.testing.vicon_script import LINEAR_MM_S, RATE_HZ, script, standin_source, true_pose, true_twist

# -- velocity estimator ------------------------------------------------------------------


def test_velocity_is_exact_for_constant_motion_and_restarts_after_gaps():
    estimator = VelocityEstimator(alpha=0.5)
    dt = 1.0 / RATE_HZ
    assert estimator.update(true_pose(0)[0] / 1000, true_pose(0)[1], None) is None
    for n in (1, 2):
        twist = estimator.update(true_pose(n)[0] / 1000, true_pose(n)[1], dt)
        np.testing.assert_allclose(twist.linear_body, true_twist(n)[0], atol=1e-9)
        np.testing.assert_allclose(twist.angular_body, true_twist(n)[1], atol=1e-9)
        np.testing.assert_allclose(twist.linear_world, LINEAR_MM_S / 1000, atol=1e-9)
    assert estimator.update(true_pose(9)[0] / 1000, true_pose(9)[1], None) is None  # gap: no difference
    assert estimator.resets == 1


def test_velocity_filter_by_hand():
    estimator = VelocityEstimator(alpha=0.5)
    quat = np.array([1.0, 0.0, 0.0, 0.0])
    estimator.update(np.zeros(3), quat, None)
    assert estimator.update(np.array([1.0, 0, 0]), quat, 1.0).linear_world[0] == pytest.approx(1.0)
    second = estimator.update(np.array([4.0, 0, 0]), quat, 1.0)
    assert second.linear_world[0] == pytest.approx(2.0)  # 1 + 0.5·(3 − 1)
    with pytest.raises(ValueError, match="alpha"):
        VelocityEstimator(alpha=0.0)


# -- Vicon client on the stand-in --------------------------------------------------------


def test_vicon_source_counts_occlusions_and_drops():
    frames = script(100, 8, dropped={102, 103}, occluded={105})
    source, client = standin_source(frames)
    source.open()
    samples = [source.read() for _ in frames]
    assert [s.frame_number if s else None for s in samples] == [100, 101, 104, None, 106, 107]
    assert source.read() is None  # the server stopped streaming
    counters = source.counters
    assert (counters.frames, counters.dropped, counters.occluded, counters.no_frame) == (6, 2, 1, 1)
    first = samples[0]
    np.testing.assert_allclose(first.position_m, true_pose(100)[0] / 1000)
    np.testing.assert_allclose(first.quat_wxyz, true_pose(100)[1], atol=1e-12)
    assert first.capture_ns == first.receive_ns - 4_000_000  # latency of frame 100 = 4 ms
    assert client.delivered_ns[100] <= first.receive_ns


def test_vicon_source_refuses_unknown_subject():
    source, _ = standin_source(script(0, 2, set(), set()), subject="robot")
    source.open()
    with pytest.raises(ConfigError, match=r"test: subject: not streamed .*\['g1'\].*'robot'"):
        source.read()


def test_missing_sdk_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vicon_dssdk", None)  # as when Vicon's SDK is not installed
    with pytest.raises(AsapError, match="vicon_dssdk.*not on PyPI"):
        import_vicon_sdk()


# -- the rclpy node ----------------------------------------------------------------------
