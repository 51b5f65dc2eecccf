"""The supervisor's takeover decision (runtime.watchdog: pure timing logic)."""

from __future__ import annotations

from asap_ros.runtime.watchdog import Watchdog

MS = 1_000_000
T0 = 1_700_000_000 * 1_000_000_000  # a system-clock stamp
ARM = T0 + Watchdog.ARM_AFTER_NS
"""First instant at which a deploy node heard steadily since T0 is armed."""


def heard_steadily(dog: Watchdog, until_ns: int, period_ns: int = 20 * MS) -> None:
    for t in range(T0, until_ns + 1, period_ns):
        dog.deploy_seen(t)


def test_no_takeover_before_the_deploy_node_was_heard_or_while_it_starts():
    dog = Watchdog(100 * MS, 60 * MS)
    assert dog.due_reason(10**12) is None
    dog.deploy_seen(T0)
    assert dog.due_reason(T0 + 500 * MS) is None  # start-up stall: not armed yet
    assert dog.next_check_ns(T0 + 500 * MS, 50 * MS) == T0 + 550 * MS


def test_silence_after_arming_triggers_takeover_exactly_at_the_limit():
    dog = Watchdog(100 * MS, 60 * MS)
    heard_steadily(dog, ARM)
    assert dog.armed
    assert dog.due_reason(ARM + 99 * MS) is None
    assert dog.next_check_ns(ARM + 10 * MS, 50 * MS) == ARM + 50 * MS + 10 * MS
    assert "silent for 100.0 ms" in dog.due_reason(ARM + 100 * MS)
    assert dog.deploy_alive(ARM + 99 * MS) and not dog.deploy_alive(ARM + 100 * MS)


def test_exit_takes_over_at_once_and_a_new_process_clears_it():
    dog = Watchdog(100 * MS, 60 * MS)
    dog.exited = "deploy process 42 exited"
    assert dog.due_reason(0) == "deploy process 42 exited"
    dog.new_deploy_process()
    assert dog.due_reason(0) is None and not dog.armed


def test_estop_must_be_obeyed_with_damping_in_time():
    dog = Watchdog(100 * MS, 60 * MS)
    heard_steadily(dog, ARM)
    dog.estop_requested(ARM)
    dog.deploy_seen(ARM + 20 * MS)  # commands keep coming, but not damping
    assert dog.next_check_ns(ARM + 20 * MS, 50 * MS) == ARM + 60 * MS
    assert "did not send damping within 60 ms" in dog.due_reason(ARM + 60 * MS)
    dog.damping_seen(ARM + 30 * MS)
    assert dog.due_reason(ARM + 60 * MS) is None
