"""The supervisor's takeover decision: when ``asap_supervisor`` must stop trusting ``asap_deploy``
and stream damping itself (pure timing logic, clock passed in; no I/O). The node feeds it from
its DDS and ROS callbacks (:mod:`asap_ros.ros.supervisor_node`)."""

from __future__ import annotations

from typing import Any

from asap_ros.core.state import NUM_MOTORS


def lowcmd_is_damping(record: Any) -> bool:
    """A C-layout LowCmd record that applies no position stiffness (kp 0 on every G1 motor)."""
    return not record["motor_cmd"]["kp"][:NUM_MOTORS].any()


class Watchdog:
    """The takeover decision (pure timing logic, clock passed in; no I/O).

    ``deploy_seen`` / ``estop_requested`` / ``damping_seen`` are fed by the DDS and ROS
    callbacks; :meth:`due_reason` says whether to take over now, :meth:`next_check_ns` when
    to look again.
    """

    ARM_AFTER_NS = 1_000_000_000
    """Silence counts only once a deploy process has been heard this long (start-up stalls)."""

    def __init__(self, takeover_after_ns: int, estop_obey_ns: int):
        self.takeover_after_ns = takeover_after_ns
        self.estop_obey_ns = estop_obey_ns
        self.first_deploy_ns = 0
        """First LowCmd or heartbeat of the current deploy process (0 = not heard yet)."""
        self.last_deploy_ns = 0
        """Newest LowCmd or heartbeat from the deploy node (0 = never heard from it)."""
        self.estop_since_ns = 0
        """When an unconfirmed e-stop was requested (0 = none pending)."""
        self.exited: str | None = None
        """Set when the deploy process was seen to exit (same host only)."""

    def deploy_seen(self, now_ns: int) -> None:
        self.first_deploy_ns = self.first_deploy_ns or now_ns
        self.last_deploy_ns = max(self.last_deploy_ns, now_ns)

    def new_deploy_process(self) -> None:
        """A (re)started deploy process announced itself: its start-up is not silence yet."""
        self.exited = None
        self.first_deploy_ns = 0

    def estop_requested(self, now_ns: int) -> None:
        if not self.estop_since_ns:
            self.estop_since_ns = now_ns

    def damping_seen(self, now_ns: int) -> None:
        if self.estop_since_ns and now_ns >= self.estop_since_ns:
            self.estop_since_ns = 0

    def deploy_alive(self, now_ns: int) -> bool:
        """Heard from the deploy node within ``takeover_after_ns``."""
        return bool(self.last_deploy_ns) and now_ns - self.last_deploy_ns < self.takeover_after_ns

    @property
    def armed(self) -> bool:
        """Silence detection is on: the current deploy process has been heard for a while."""
        return bool(self.first_deploy_ns) and self.last_deploy_ns - self.first_deploy_ns >= self.ARM_AFTER_NS

    def due_reason(self, now_ns: int) -> str | None:
        """Why to take over at ``now_ns``, or None."""
        if self.exited:
            return self.exited
        if self.estop_since_ns and now_ns - self.estop_since_ns >= self.estop_obey_ns:
            return f"deploy did not send damping within {self.estop_obey_ns / 1e6:g} ms of an e-stop"
        if self.armed and now_ns - self.last_deploy_ns >= self.takeover_after_ns:
            silent_ms = (now_ns - self.last_deploy_ns) / 1e6
            return f"deploy silent for {silent_ms:.1f} ms (no rt/lowcmd, no heartbeat)"
        return None

    def next_check_ns(self, now_ns: int, idle_ns: int) -> int:
        """The next instant at which :meth:`due_reason` could change (at most ``idle_ns`` away)."""
        candidates = [now_ns + idle_ns]
        if self.armed:
            candidates.append(self.last_deploy_ns + self.takeover_after_ns)
        if self.estop_since_ns:
            candidates.append(self.estop_since_ns + self.estop_obey_ns)
        return min(candidates)
