"""Who may write ``rt/lowcmd``: the deploy node's lease, granted beat by beat by the supervisor.

Exactly one process writes ``rt/lowcmd`` at any instant. The deploy node's control thread sends
a *beat* ``(session, seq)`` every control step. A supervisor that is not streaming damping
answers each beat with a *grant* that names it and a lease length. The deploy node may write
while the newest grant names one of its own beats sent less than ``lease`` ago, measured on
its own monotonic clock: a grant that waited in a queue, or was delivered after the process
had been stopped (``SIGSTOP``, a stall), names an old beat and grants nothing. The supervisor
takes over only after the deploy node's lease has run out (or the deploy node said it yielded,
or its process exited), and hands back only on an operator reset while the deploy node is in
PASSIVE or DAMPING; each handover leaves a silent gap on the bus (:data:`HANDOVER_GAP_NS`).

Grant states: ``WATCHING`` (write as the controller says), ``ESTOP`` (latch DAMPING with the
supervisor's reason, once per e-stop, and keep writing), ``TAKEOVER`` (latch DAMPING, write
nothing: the supervisor streams damping). Pure logic, clock passed in.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

HANDOVER_GAP_NS = 30_000_000
"""Silence on ``rt/lowcmd`` between the last command of one writer and the first of the next,
longer than a 20 ms control period, so no 20 ms window holds two writers."""


class Supervision(enum.IntEnum):
    """What the supervisor's newest grant says (wire value of ``SupervisorGrant_.state``)."""

    WATCHING = 0
    ESTOP = 1
    TAKEOVER = 2


@dataclass(frozen=True)
class Grant:
    """The supervisor's newest word to the deploy node."""

    state: Supervision
    session: int
    """The deploy session granted (0: none; WATCHING for session 0 is a handback: grants follow)."""
    seq: int
    """The newest beat of that session the supervisor had seen."""
    lease_ns: int
    reason: str
    """Why (ESTOP, TAKEOVER); empty while WATCHING."""
    estop: int = 0
    """Count of the supervisor's e-stops: an ESTOP grant latches DAMPING once per e-stop (the
    same grant read again after an operator Reset latches nothing)."""


@dataclass(frozen=True)
class Verdict:
    """What the control step may do now."""

    may_write: bool
    fault: str | None = None
    """Latch DAMPING with this reason (None: nothing to latch)."""
    refusal: str | None = None
    """Why Stand and Start are refused now (None: the supervisor does not object)."""


class WriteLease:
    """The deploy side: beats sent, the newest grant, and the verdict for each control step.

    ``damping_margin_ns`` before the lease runs out, the deploy node latches DAMPING itself (the
    supervisor has not answered for a while), so the last commands the robot gets from it are
    damping.
    """

    def __init__(self, session: int, damping_margin_ns: int, history: int = 512) -> None:
        if session <= 0:
            raise ValueError("session must be a positive id")
        self.session = session
        self.damping_margin_ns = damping_margin_ns
        self._sent_ns = [0] * history
        self._sent_seq = [-1] * history
        self._grant: Grant | None = None
        self._granted = False
        """A grant has named one of this session's beats: from then on, silence is a fault."""
        self._estop_latched = 0
        """The supervisor e-stop already latched (:attr:`Grant.estop`)."""
        self._reset_after_seq = -1
        """Beats up to this one went out before the operator's latest Reset."""
        self._last_beat_ns: int | None = None
        self._resumed_ns: int | None = None
        """When this process last came back from a stall of its own (no beat for longer than
        ``damping_margin_ns``): an expired lease is then its own fault, not the supervisor's
        silence, and the supervisor's word (a takeover, a fresh grant) is awaited for one lease."""

    def beat(self, seq: int, now_ns: int) -> None:
        """Beat ``seq`` goes out at ``now_ns`` (monotonic)."""
        slot = seq % len(self._sent_ns)
        self._sent_seq[slot], self._sent_ns[slot] = seq, now_ns
        self._last_beat_ns = now_ns

    def operator_reset(self, last_seq: int) -> None:
        """The operator left DAMPING after beat ``last_seq``: an e-stop the supervisor granted on an
        earlier beat (the same e-stop, still travelling by the other path) latches nothing."""
        self._reset_after_seq = last_seq

    def receive(self, grant: Grant) -> None:
        self._grant = grant
        self._granted = self._granted or grant.session == self.session

    @property
    def yielded(self) -> bool:
        """The supervisor's takeover has been seen: nothing is written until it hands back."""
        return self._grant is not None and self._grant.state is Supervision.TAKEOVER

    def verdict(self, now_ns: int) -> Verdict:
        if self._last_beat_ns is not None and now_ns - self._last_beat_ns > self.damping_margin_ns:
            self._resumed_ns = now_ns
        grant = self._grant
        if grant is None:
            return Verdict(False, refusal="no grant from the supervisor yet (is asap_supervisor running?)")
        if grant.state is Supervision.TAKEOVER:
            reason = f"supervisor took over rt/lowcmd ({grant.reason})"
            return Verdict(False, fault=reason, refusal=f"{reason}; reset the supervisor first")
        if grant.session == 0:
            return Verdict(False, refusal="the supervisor is handing rt/lowcmd back; no grant yet")
        age_ns = self._age_ns(grant, now_ns)
        if age_ns is None and not self._granted:  # starting: the grants still name another process
            return Verdict(False, refusal="no grant from the supervisor for this process yet")
        if age_ns is None or age_ns >= grant.lease_ns:
            if self._resumed_ns is not None and now_ns - self._resumed_ns < grant.lease_ns:
                return Verdict(False, refusal="resumed after a stall; waiting for the supervisor's word")
            return Verdict(False, fault=self._silence(age_ns, grant), refusal="no current grant from the supervisor")
        if age_ns >= grant.lease_ns - self.damping_margin_ns:
            return Verdict(True, fault=self._silence(age_ns, grant), refusal="no current grant from the supervisor")
        if grant.state is Supervision.ESTOP and grant.estop != self._estop_latched \
                and grant.seq > self._reset_after_seq:
            self._estop_latched = grant.estop
            return Verdict(True, fault=f"supervisor e-stop ({grant.reason})")
        return Verdict(True)

    def _age_ns(self, grant: Grant, now_ns: int) -> int | None:
        """How long ago the granted beat went out; None if it is not one of ours (any more)."""
        slot = grant.seq % len(self._sent_ns)
        if grant.session != self.session or self._sent_seq[slot] != grant.seq:
            return None
        return now_ns - self._sent_ns[slot]

    @staticmethod
    def _silence(age_ns: int | None, grant: Grant) -> str:
        lease_ms = grant.lease_ns / 1e6
        if age_ns is None:
            return f"no grant from the supervisor for this process (lease {lease_ms:g} ms)"
        return f"no grant from the supervisor for {age_ns / 1e6:.0f} ms (lease {lease_ms:g} ms)"
