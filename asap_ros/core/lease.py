"""Who may write ``rt/lowcmd``: the deploy node's lease, granted beat by beat by one supervisor.

Exactly one process writes ``rt/lowcmd`` at any instant. The deploy node's control thread sends
a :class:`Beat` after every control step; the supervisor with authority answers each beat with a
:class:`Grant` naming itself, the beat and a lease length. The deploy node obeys one supervisor
(it *binds* to the first it hears, and to another only after that one has been silent for a
lease) and may write while the newest grant of that supervisor names one of its own beats sent
less than ``lease`` ago, measured on its own monotonic clock: a grant that waited in a socket
while the process was stopped names an old beat and grants nothing.

Grant states: ``WATCHING`` (write as the controller says), ``ESTOP`` (an e-stop is held at the
supervisor: DAMPING, and no Reset, Stand or Start until the supervisor releases it),
``TAKEOVER`` (DAMPING, write nothing: the supervisor streams damping).

Never unattended: when the supervisor obeyed goes silent, the deploy node streams damping
itself (``OWN_DAMPING``), :data:`TAKEOVER_SILENCE_NS` after the newest TAKEOVER grant's beat, or
``lease`` + two control periods after the newest WATCHING/ESTOP grant's beat. A supervisor
writes only after the deploy node said it yielded, exited, or lost its lease while the
supervisor kept sending TAKEOVER grants (:mod:`asap_ros.core.supervisor`), so the two never write
at once. After a stall of its own the deploy node waits one lease for the supervisor's word
before it blames the supervisor's silence (:data:`REDISCOVERY_WAIT_NS` after a stall long enough
for DDS to forget it). Pure logic, times passed in (ns, monotonic).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from asap_ros.core.state_machine import Mode

__all__ = [
    "DDS_LEASE_NS",
    "HANDOVER_GAP_NS",
    "REDISCOVERY_WAIT_NS",
    "TAKEOVER_SILENCE_NS",
    "Beat",
    "BeatFlag",
    "Grant",
    "Supervision",
    "Verdict",
    "WriteLease",
    "Writer",
]

HANDOVER_GAP_NS = 30_000_000
"""Silence on ``rt/lowcmd`` between the last command of one writer and the first of the next,
longer than a 20 ms control period, so no 20 ms window holds two writers."""
DDS_LEASE_NS = 10_000_000_000
"""Cyclone DDS's participant lease (its default, as the nodes run it): a process stalled this
long has been forgotten by its peers, which must discover it again before its beats reach the
supervisor and the supervisor's grants reach it (measured: about 1 s on loopback)."""
REDISCOVERY_WAIT_NS = 3_000_000_000
"""How long the deploy node waits for the supervisor's word after a stall of at least
:data:`DDS_LEASE_NS` (instead of one lease) before it blames the supervisor's silence."""
TAKEOVER_SILENCE_NS = 70_000_000
"""A TAKEOVER grant naming a beat older than this: the supervisor streaming damping has gone
silent, and the deploy node streams damping itself. The supervisor answers every beat (20 ms)
at once and stops writing 20 ms after its newest TAKEOVER grant, so 70 ms leaves the
:data:`HANDOVER_GAP_NS` between its last command and the deploy node's first; damping resumes
within 70 ms + one control period (90 ms) of the supervisor's last grant."""


class Supervision(enum.IntEnum):
    """What a grant says (wire value of ``SupervisorGrant_.state``)."""

    WATCHING = 0
    ESTOP = 1
    TAKEOVER = 2


class BeatFlag(enum.IntFlag):
    """What a beat says of the deploy node at the end of its control step (wire bits)."""

    NONE = 0
    WRITING = 1
    """It wrote ``rt/lowcmd`` in this step (under a lease, or its own damping)."""
    YIELDED = 2
    """It obeys a TAKEOVER: it writes nothing until the supervisor hands back."""
    TOOK_BACK = 4
    """Its supervisor went silent: it streams damping itself."""
    ESTOP_HELD = 8
    """A supervisor e-stop is held: a (re)started supervisor takes it over."""
    HEARS_ROBOT = 16
    """Its newest robot state is fresh (younger than the state age limit, CRC valid)."""


@dataclass(frozen=True)
class Beat:
    """The deploy node's word after each control step."""

    session: int
    """Random id of the deploy process."""
    seq: int
    """Control step counter of that process."""
    mode: Mode
    supervisor: int
    """The supervisor session it obeys (0: none yet)."""
    flags: BeatFlag
    pid: int
    host: int
    """Hash of the host name (:func:`asap_ros.runtime.arbitration.host_id`): a supervisor on the
    same host watches ``pid`` for exit."""


@dataclass(frozen=True)
class Grant:
    """A supervisor's word to the deploy node."""

    state: Supervision
    supervisor: int
    """Session of the granting supervisor (non-zero)."""
    session: int
    """The deploy session answered (0: none heard yet)."""
    seq: int
    """The newest beat of that session the supervisor had seen."""
    lease_ns: int
    reason: str
    """Why (ESTOP, TAKEOVER); empty while WATCHING."""


class Writer(enum.Enum):
    """Who the control step writes for."""

    NONE = "nothing is written"
    LEASED = "under the supervisor's current grant"
    OWN_DAMPING = "damping on its own: the supervisor went silent"


@dataclass(frozen=True)
class Verdict:
    """What the control step may do, decided at its start."""

    writer: Writer
    write_until_ns: int = 0
    """A write at or after this instant (monotonic) is refused: the step outlived its lease."""
    fault: str | None = None
    """Latch DAMPING with this reason (None: nothing to latch)."""
    refusal: str | None = None
    """Why Stand and Start are refused now (None: the supervisor does not object)."""
    reset_refusal: str | None = None
    """Why Reset is refused now (a held e-stop, a takeover, no supervisor)."""
    yielded: bool = False
    """A TAKEOVER is obeyed: nothing is written until the supervisor hands back."""

    @property
    def may_write(self) -> bool:
        return self.writer is not Writer.NONE

    def allows(self, now_ns: int) -> bool:
        """Whether a write at ``now_ns`` stays within this verdict."""
        return self.writer is not Writer.NONE and now_ns < self.write_until_ns


_LONG_AGO_NS = 1 << 62
"""The age of a beat that has left the history (older than any lease)."""
_NO_GRANT = Verdict(Writer.NONE, refusal="no grant from the supervisor yet (is asap_supervisor running?)",
                    reset_refusal="no grant from the supervisor yet (is asap_supervisor running?)")
_NO_CURRENT_GRANT = "no current grant from the supervisor"
_AWAITING_ANSWER = Verdict(Writer.NONE, refusal=_NO_CURRENT_GRANT, reset_refusal=_NO_CURRENT_GRANT)
"""After a stall of its own, until the supervisor answers a beat: no write, no fault."""


@dataclass
class _Bound:
    """The supervisor obeyed and its newest grant."""

    supervisor: int
    grant: Grant
    heard_ns: int
    """When its newest grant was taken (this process's clock)."""
    named: bool
    """It has named this process in a grant (before that, its silence towards it is no fault)."""


@dataclass
class WriteLease:
    """The deploy side: beats sent, the supervisor obeyed, and the verdict for each control step.

    ``period_ns`` is the control period: ``2 * period_ns`` before a lease runs out unanswered the
    deploy node latches DAMPING itself, so its last leased commands are damping; within a lease of
    its own start or stall it writes nothing and waits for the supervisor's word instead.
    """

    session: int
    period_ns: int
    history: int = 512
    _sent_ns: list[int] = field(init=False)
    _sent_seq: list[int] = field(init=False)
    _bound: _Bound | None = field(default=None, init=False)
    _estop_held: str | None = field(default=None, init=False)
    _last_verdict_ns: int | None = field(default=None, init=False)
    _resumed_ns: int | None = field(default=None, init=False)
    """When this process last started or came back from a stall of its own (no verdict for longer
    than ``2 * period_ns``, a stall within a step included): the supervisor's word is awaited for
    one lease (:data:`REDISCOVERY_WAIT_NS` after a stall of :data:`DDS_LEASE_NS`) before its
    silence counts."""
    _rediscovering: bool = field(default=False, init=False)
    ignored_grants: int = field(default=0, init=False)
    """Grants of supervisors other than the one obeyed."""
    last_verdict: Verdict = field(default=_NO_GRANT, init=False)

    def __post_init__(self) -> None:
        if self.session <= 0:
            raise ValueError("session must be a positive id")
        if self.period_ns <= 0:
            raise ValueError("period_ns must be positive")
        self._sent_ns = [0] * self.history
        self._sent_seq = [-1] * self.history

    @property
    def supervisor(self) -> int:
        """The supervisor obeyed (0: none)."""
        return self._bound.supervisor if self._bound is not None else 0

    @property
    def estop_held(self) -> str | None:
        """The held supervisor e-stop's reason (None: none held)."""
        return self._estop_held

    @property
    def margin_ns(self) -> int:
        return 2 * self.period_ns

    # --- inputs ------------------------------------------------------------------------------
    def beat(self, seq: int, now_ns: int) -> None:
        """Beat ``seq`` goes out at ``now_ns``."""
        slot = seq % self.history
        self._sent_seq[slot], self._sent_ns[slot] = seq, now_ns

    def receive(self, grant: Grant, now_ns: int) -> None:
        """A grant taken from the bus at ``now_ns``: kept if it is the obeyed supervisor's (or, when
        none is obeyed or the obeyed one has been silent for a lease, binds to its sender)."""
        bound = self._bound
        if bound is None or grant.supervisor == bound.supervisor or now_ns - bound.heard_ns >= bound.grant.lease_ns:
            named = grant.session == self.session or (bound is not None and bound.supervisor == grant.supervisor
                                                      and bound.named)
            self._bound = _Bound(grant.supervisor, grant, now_ns, named)
            if grant.state is Supervision.ESTOP and self._age_ns(grant, now_ns) is not None:
                self._estop_held = grant.reason or "supervisor e-stop"
            elif grant.state is Supervision.WATCHING and self._current(grant, now_ns):
                self._estop_held = None  # released at the supervisor
        else:
            self.ignored_grants += 1

    # --- the step's verdict --------------------------------------------------------------------
    def verdict(self, now_ns: int) -> Verdict:
        """What this step may do; kept as :attr:`last_verdict` (read by other threads)."""
        if self._last_verdict_ns is None or now_ns - self._last_verdict_ns > self.margin_ns:
            self._resumed_ns = now_ns
            self._rediscovering = self._last_verdict_ns is not None and now_ns - self._last_verdict_ns >= DDS_LEASE_NS
        self._last_verdict_ns = now_ns
        self.last_verdict = verdict = self._decide(now_ns)
        return verdict

    def beat_flags(self, wrote: bool, hears_robot: bool) -> BeatFlag:
        """What this step's beat says, from the newest verdict."""
        verdict = self.last_verdict
        flags = BeatFlag.WRITING if wrote else BeatFlag.NONE
        if verdict.yielded:
            flags |= BeatFlag.YIELDED
        if verdict.writer is Writer.OWN_DAMPING:
            flags |= BeatFlag.TOOK_BACK
        if self._estop_held is not None:
            flags |= BeatFlag.ESTOP_HELD
        if hears_robot:
            flags |= BeatFlag.HEARS_ROBOT
        return flags

    def allows_write(self, now_ns: int) -> bool:
        """Whether a write at ``now_ns`` stays within the newest verdict (any thread)."""
        return self.last_verdict.allows(now_ns)

    def _decide(self, now_ns: int) -> Verdict:
        bound = self._bound
        if bound is None:
            return _NO_GRANT
        grant = bound.grant
        age_ns = self._age_ns(grant, now_ns)
        wait_ns = REDISCOVERY_WAIT_NS if self._rediscovering else grant.lease_ns
        waiting = self._resumed_ns is not None and now_ns - self._resumed_ns < wait_ns
        if grant.state is Supervision.TAKEOVER:
            reason = f"supervisor took over rt/lowcmd ({grant.reason})"
            if age_ns is None or age_ns < TAKEOVER_SILENCE_NS or waiting:
                return Verdict(Writer.NONE, fault=reason, refusal=f"{reason}; reset the supervisor first",
                               reset_refusal="the supervisor streams damping on rt/lowcmd; reset the supervisor first",
                               yielded=True)
            return self._own_damping(now_ns, f"{reason}, then went silent: {self._silence(age_ns, bound, now_ns)}")
        if age_ns is None:  # the supervisor names another deploy process, or none yet
            if not bound.named:
                refusal = "no grant from the supervisor for this process yet"
                return Verdict(Writer.NONE, refusal=refusal, reset_refusal=refusal)
            refusal = "the supervisor grants another deploy process"
            return Verdict(Writer.NONE, fault=refusal, refusal=refusal, reset_refusal=refusal)
        if age_ns >= grant.lease_ns:
            if waiting:
                return _AWAITING_ANSWER
            silent = self._silence(age_ns, bound, now_ns)
            if age_ns >= grant.lease_ns + self.margin_ns:
                return self._own_damping(now_ns, silent)
            return Verdict(Writer.NONE, fault=silent, refusal=_NO_CURRENT_GRANT, reset_refusal=_NO_CURRENT_GRANT)
        write_until_ns = now_ns - age_ns + grant.lease_ns
        if self._estop_held is not None:
            held = f"supervisor e-stop held ({self._estop_held}); reset the supervisor first"
            return Verdict(Writer.LEASED, write_until_ns, fault=f"supervisor e-stop ({self._estop_held})",
                           refusal=held, reset_refusal=held)
        if age_ns >= grant.lease_ns - self.margin_ns:
            if waiting:  # its own stall aged the grant, within the lease's last two periods too
                return _AWAITING_ANSWER
            return Verdict(Writer.LEASED, write_until_ns, fault=self._silence(age_ns, bound, now_ns), refusal=_NO_CURRENT_GRANT)
        return Verdict(Writer.LEASED, write_until_ns)

    def _own_damping(self, now_ns: int, fault: str) -> Verdict:
        refusal = "the supervisor is silent; asap_deploy streams damping until a supervisor grants again"
        return Verdict(Writer.OWN_DAMPING, now_ns + self.margin_ns, fault=f"{fault}; damping from asap_deploy",
                       refusal=refusal, reset_refusal=refusal)

    def _current(self, grant: Grant, now_ns: int) -> bool:
        age_ns = self._age_ns(grant, now_ns)
        return age_ns is not None and age_ns < grant.lease_ns

    def _age_ns(self, grant: Grant, now_ns: int) -> int | None:
        """How long ago the granted beat went out (one no longer in the history: older than any
        lease); None if the grant names another process or none."""
        if grant.session != self.session:
            return None
        slot = grant.seq % self.history
        if self._sent_seq[slot] != grant.seq:
            return _LONG_AGO_NS
        return now_ns - self._sent_ns[slot]

    def _silence(self, age_ns: int | None, bound: _Bound, now_ns: int) -> str:
        """Why the lease is running out, and which side went quiet: grants that keep coming but
        answer an old beat (the supervisor hears no beats), or no grant at all for as long."""
        lease_ms = bound.grant.lease_ns / 1e6
        if age_ns is None:
            return f"no grant from the supervisor for this process (lease {lease_ms:g} ms)"
        newest = f"its newest grant came {(now_ns - bound.heard_ns) / 1e6:.0f} ms ago"
        if age_ns == _LONG_AGO_NS:
            return (f"no grant from the supervisor answers any of the last {self.history} beats (lease {lease_ms:g} ms): "
                    f"{newest}")
        return (f"no grant from the supervisor for {age_ns / 1e6:.0f} ms (lease {lease_ms:g} ms): {newest} and "
                f"answers a beat sent {age_ns / 1e6:.0f} ms ago")
