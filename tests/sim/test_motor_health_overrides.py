"""The simulator's motor-health overrides (its control topic's motor_* actions), without DDS:
the simulator's own parts, its LowState encoder and the runtime's decoder."""

from __future__ import annotations

import re

import numpy as np
import pytest

from asap_ros.core.errors import AsapError
from asap_ros.core.state import NUM_MOTORS, RobotState
from asap_ros.g1.codec import decode_lowstate_cdr
from asap_ros.sim.config import load_sim_config
from asap_ros.sim.dds_types import MOTOR_ERROR, MOTOR_TEMPERATURE, MOTOR_TEMPERATURE_RELEASE
from asap_ros.sim.simulator import Simulator

KNEE = 3


@pytest.fixture
def sim() -> Simulator:
    return Simulator(load_sim_config(), domain=0)  # parts only: start() (DDS) is never called


def published(sim: Simulator) -> RobotState:
    """Apply the queued requests (as the physics thread does), encode a LowState, decode it."""
    sim._apply_requests()
    reading = sim.reading(np.zeros(NUM_MOTORS), np.ones(NUM_MOTORS, dtype=bool))
    return decode_lowstate_cdr(sim.lowstate.encode(1, reading), 0, 0)


def test_error_bits_and_temperatures_reach_the_lowstate_until_cleared(sim: Simulator) -> None:
    model_c = sim.thermal.temperature_c.copy()
    sim.request(MOTOR_ERROR, 0x200, motor=KNEE)
    sim.request(MOTOR_TEMPERATURE, 80.0, motor=KNEE)
    state = published(sim)
    assert state.crc_ok and state.motor_error[KNEE] == 0x200 and state.motor_error.sum() == 0x200
    assert state.temperature[KNEE] == 80.0
    np.testing.assert_array_equal(np.delete(state.temperature, KNEE), np.round(np.delete(model_c, KNEE)))
    sim.request(MOTOR_TEMPERATURE, 70.0, motor=-1)
    np.testing.assert_array_equal(published(sim).temperature, np.full(NUM_MOTORS, 70.0))
    sim.request(MOTOR_ERROR, 0, motor=KNEE)
    sim.request(MOTOR_TEMPERATURE_RELEASE, motor=-1)
    state = published(sim)
    assert not state.motor_error.any()
    np.testing.assert_array_equal(state.temperature, np.round(model_c))
    assert sim.controls_applied == 5


@pytest.mark.parametrize(
    ("action", "value", "motor", "problem"),
    [
        (MOTOR_ERROR, 0x200, -1, "motor must be 0..28, got -1"),
        (MOTOR_ERROR, 0x200, 29, "motor must be 0..28, got 29"),
        (MOTOR_ERROR, 1.5, 3, "value must be error bits 0..2^32-1, got 1.5"),
        (MOTOR_ERROR, float(1 << 32), 3, "value must be error bits"),
        (MOTOR_ERROR, float("nan"), 3, "value must be error bits"),
        (MOTOR_TEMPERATURE, 250.0, 3, "value must be a temperature -40..200 C, got 250.0"),
        (MOTOR_TEMPERATURE, float("nan"), 3, "value must be a temperature"),
        (MOTOR_TEMPERATURE_RELEASE, 0.0, 30, "motor must be -1 (all) or 0..28, got 30"),
    ],
)
def test_bad_motor_actions_are_refused_naming_the_action(sim: Simulator, action, value, motor, problem) -> None:
    with pytest.raises(AsapError, match=re.escape(f"simulator action {action}: {problem}")):
        sim.request(action, value, motor=motor)
