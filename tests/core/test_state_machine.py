"""The mode table: every (mode, request) and (mode, event) pair, faults, and the DAMPING latch."""

from __future__ import annotations

import itertools
import random

import pytest

from asap_ros.core.errors import RejectedRequest
from asap_ros.core.state_machine import EStop, Event, Mode, Reset, Stand, Start, StateMachine, Stop

P, SU, H, PR, T, D = Mode.PASSIVE, Mode.STAND_UP, Mode.HOLD, Mode.PREPARE, Mode.TRACKING, Mode.DAMPING

REQUESTS = {
    "Stand": Stand(),
    "Start": Start("CR7_level1"),
    "Stop": Stop(),
    "EStop": EStop("button"),
    "Reset": Reset(),
}

# Written out by hand (not derived from the module's table): the accepted requests.
ACCEPTED = {
    (P, "Stand"): SU,
    (H, "Start"): PR,
    (PR, "Stop"): H,
    (T, "Stop"): H,
    (D, "Reset"): P,
    **{(mode, "EStop"): D for mode in Mode},
}

EVENTS = {
    (SU, Event.STOOD_UP): H,
    (PR, Event.PREPARED): T,
    (T, Event.MOTION_DONE): H,
}


def machine_in(mode: Mode) -> StateMachine:
    """A machine brought to ``mode`` through legal requests and events only."""
    machine = StateMachine()
    path = {
        P: [],
        SU: [Stand()],
        H: [Stand(), Event.STOOD_UP],
        PR: [Stand(), Event.STOOD_UP, Start("kick_level1")],
        T: [Stand(), Event.STOOD_UP, Start("kick_level1"), Event.PREPARED],
        D: [Stand(), "fault"],
    }[mode]
    for i, step in enumerate(path):
        if isinstance(step, Event):
            machine.event(step, i)
        elif step == "fault":
            machine.fault("joint left_knee_joint speed 40 rad/s", i)
        else:
            machine.request(step, i)
    assert machine.mode is mode
    return machine


def snapshot(machine: StateMachine) -> tuple:
    return machine.mode, machine.fault_reason, machine.motion


@pytest.mark.parametrize(("mode", "name"), list(itertools.product(Mode, REQUESTS)), ids=lambda v: getattr(v, "name", v))
def test_every_request_in_every_mode(mode: Mode, name: str) -> None:
    machine = machine_in(mode)
    before = snapshot(machine)
    request = REQUESTS[name]
    expected = ACCEPTED.get((mode, name))
    if expected is None:
        with pytest.raises(RejectedRequest) as refused:
            machine.request(request, 1000)
        assert snapshot(machine) == before
        assert mode.name in str(refused.value)
        if mode is D:
            assert "only Reset" in str(refused.value) and before[1] in str(refused.value)
        return
    transition = machine.request(request, 1000)
    assert machine.mode is expected
    if mode is D and name == "EStop":  # already latched: no transition, first reason kept
        assert transition is None and machine.fault_reason == before[1]
        return
    assert (transition.from_mode, transition.to_mode, transition.stamp_ns) == (mode, expected, 1000)
    if expected is D:
        assert machine.fault_reason == "e-stop: button" == transition.reason
    if expected is PR:
        assert machine.motion == "CR7_level1"
    if expected not in (PR, T):
        assert machine.motion is None
    if name == "Reset":
        assert machine.fault_reason is None


@pytest.mark.parametrize(("mode", "event"), list(itertools.product(Mode, Event)), ids=lambda v: v.name)
def test_every_event_in_every_mode(mode: Mode, event: Event) -> None:
    machine = machine_in(mode)
    before = snapshot(machine)
    expected = EVENTS.get((mode, event))
    if expected is None:
        with pytest.raises(ValueError, match=event.name):
            machine.event(event, 5)
        assert snapshot(machine) == before
        return
    transition = machine.event(event, 5)
    assert (machine.mode, transition.from_mode, transition.to_mode) == (expected, mode, expected)
    assert transition.reason == event.value
    assert machine.motion == ("kick_level1" if expected is T else None)


@pytest.mark.parametrize("mode", list(Mode), ids=lambda m: m.name)
def test_fault_latches_damping_from_every_mode(mode: Mode) -> None:
    machine = machine_in(mode)
    first = machine.fault_reason
    transition = machine.fault("torso tilt 70 deg", 7)
    assert machine.mode is D
    if mode is D:
        assert transition is None and machine.fault_reason == first
    else:
        assert (transition.from_mode, transition.to_mode, transition.reason) == (mode, D, "torso tilt 70 deg")
        assert machine.fault_reason == "torso tilt 70 deg" and machine.motion is None


def test_rejection_names_the_modes_that_accept_the_request() -> None:
    with pytest.raises(RejectedRequest, match=r"Start\(x\) refused in mode PASSIVE; accepted in HOLD"):
        StateMachine().request(Start("x"), 0)
    with pytest.raises(RejectedRequest, match="accepted in PREPARE, TRACKING"):
        StateMachine().request(Stop(), 0)


def test_damping_is_left_only_by_reset_and_only_to_passive() -> None:
    """Thousands of random requests, events and faults: DAMPING holds until Reset."""
    rng = random.Random(7)
    machine = machine_in(D)
    reason = machine.fault_reason
    inputs = [*REQUESTS.values(), *Event, "fault"]
    resets = 0
    for now in range(5000):
        item = rng.choice(inputs)
        try:
            if isinstance(item, Event):
                machine.event(item, now)
            elif item == "fault":
                machine.fault("another fault", now)
            else:
                machine.request(item, now)
        except (RejectedRequest, ValueError):
            pass
        if isinstance(item, Reset):
            assert machine.mode is P
            resets += 1
            machine = machine_in(D)
            reason = machine.fault_reason
        assert machine.mode is D and machine.fault_reason == reason
    assert resets > 100
