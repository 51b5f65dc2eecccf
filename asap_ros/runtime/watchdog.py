"""The supervisor's side of the ``rt/lowcmd`` lease: when to take over, when to grant, when to hand back.

Pure timing logic on the monotonic clock (times passed in, ns); the supervisor node feeds it
what it hears on DDS and acts on its answers. The protocol is in :mod:`asap_ros.runtime.lease`.
"""

from __future__ import annotations

from typing import Any

from asap_ros.core.state import NUM_MOTORS
from asap_ros.core.state_machine import Mode
from asap_ros.runtime.arbitration import Beat
from asap_ros.runtime.lease import HANDOVER_GAP_NS

BEAT_FRESH_NS = 500_000_000
"""A beat older than this says nothing about the deploy node's mode any more."""
RELEASE_MODES = frozenset({Mode.PASSIVE, Mode.DAMPING})
"""Modes in which the deploy node may get rt/lowcmd back: it applies no stiffness of its own."""


def lowcmd_is_damping(record: Any) -> bool:
    """A C-layout LowCmd record that applies no position stiffness (kp 0 on every G1 motor)."""
    return not record["motor_cmd"]["kp"][:NUM_MOTORS].any()


class Watchdog:
    """Takeover decisions and the grant/handover rules of one supervisor."""

    def __init__(self, takeover_after_ns: int, estop_obey_ns: int, lease_ns: int,
                 handover_gap_ns: int = HANDOVER_GAP_NS) -> None:
        self.takeover_after_ns = takeover_after_ns
        self.estop_obey_ns = estop_obey_ns
        self.lease_ns = lease_ns
        self.handover_gap_ns = handover_gap_ns
        self.last_lowcmd_ns = 0
        """Newest rt/lowcmd from the deploy process (0: none yet from the current process)."""
        self.estop_since_ns = 0
        """When an unconfirmed e-stop was requested (0 = none pending)."""
        self.exited: str | None = None
        """Set when the deploy process was seen to exit (same host only)."""
        self.beat: Beat | None = None
        """Newest beat of the deploy session being granted."""
        self.last_beat_ns = 0
        self.last_grant_ns = 0
        """When the newest grant went out (its lease can run until this + ``lease_ns``)."""
        self.grants_from_ns = 0
        """No grant before this instant (a handover gap after the supervisor's own stream)."""
        self.taking_over = False
        self.yielded = False
        """A beat since the takeover said the deploy node saw it and writes nothing."""

    # --- what the supervisor hears ---------------------------------------------------------
    def lowcmd_seen(self, now_ns: int, damping: bool) -> None:
        self.last_lowcmd_ns = max(self.last_lowcmd_ns, now_ns)
        if damping and self.estop_since_ns and now_ns >= self.estop_since_ns:
            self.estop_since_ns = 0

    def new_deploy_process(self) -> None:
        """A (re)started deploy process announced itself: its start-up is not silence."""
        self.exited = None
        self.last_lowcmd_ns = 0

    def estop_requested(self, now_ns: int) -> None:
        if not self.estop_since_ns:
            self.estop_since_ns = now_ns

    def beat_received(self, beat: Beat, now_ns: int) -> bool:
        """Record a beat; True if it should be answered with a grant now."""
        if self.beat is not None and beat.session != self.beat.session:
            if now_ns - self.last_beat_ns < self.lease_ns + self.handover_gap_ns:
                return False  # a second deploy process while the first still beats: never two leases
        self.beat, self.last_beat_ns = beat, now_ns
        if self.taking_over:
            self.yielded = self.yielded or beat.yielded
            return False
        return now_ns >= self.grants_from_ns

    def grant_sent(self, now_ns: int) -> None:
        self.last_grant_ns = now_ns

    # --- decisions ---------------------------------------------------------------------------
    def due_reason(self, now_ns: int) -> str | None:
        """Why to take over at ``now_ns``, or None. Silence counts once the process has written."""
        if self.exited:
            return self.exited
        if self.estop_since_ns and now_ns - self.estop_since_ns >= self.estop_obey_ns:
            return f"deploy did not send damping within {self.estop_obey_ns / 1e6:g} ms of an e-stop"
        if self.last_lowcmd_ns and now_ns - self.last_lowcmd_ns >= self.takeover_after_ns:
            silent_ms = (now_ns - self.last_lowcmd_ns) / 1e6
            return f"deploy silent for {silent_ms:.1f} ms (no rt/lowcmd)"
        return None

    def next_check_ns(self, now_ns: int, idle_ns: int) -> int:
        """The next instant at which :meth:`due_reason` could change (at most ``idle_ns`` away)."""
        candidates = [now_ns + idle_ns]
        if self.last_lowcmd_ns:
            candidates.append(self.last_lowcmd_ns + self.takeover_after_ns)
        if self.estop_since_ns:
            candidates.append(self.estop_since_ns + self.estop_obey_ns)
        return min(candidates)

    def take_over(self) -> None:
        self.taking_over, self.yielded = True, False

    def first_write_ns(self) -> int:
        """Earliest instant of the supervisor's own first damping command after a takeover: a
        handover gap after the deploy's last command, and after its lease has run out unless
        its process is gone or it said it yielded."""
        start = self.last_lowcmd_ns + self.handover_gap_ns
        if self.exited or self.yielded:
            return start
        return max(start, self.last_grant_ns + self.lease_ns + self.handover_gap_ns)

    def release_refusal(self, now_ns: int) -> str | None:
        """Why an operator reset may not hand rt/lowcmd back now (None: it may)."""
        if self.exited:
            return self.exited
        if self.beat is None or now_ns - self.last_beat_ns >= BEAT_FRESH_NS:
            return "no beat from the deploy node's control loop"
        if self.beat.mode not in RELEASE_MODES:
            return (f"the deploy node is in {self.beat.mode.name}; it must be in PASSIVE or DAMPING "
                    "(e-stop or reset it first)")
        if not self.beat.yielded:
            return "the deploy node has not yet acknowledged the takeover"
        return None

    def release(self, last_own_write_ns: int) -> None:
        """Hand back after a reset: grants start a handover gap after the supervisor's last command."""
        self.taking_over = self.yielded = False
        self.estop_since_ns = 0
        self.last_lowcmd_ns = 0
        self.grants_from_ns = last_own_write_ns + self.handover_gap_ns
