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

Grants count only from the DDS participant of the supervisor obeyed (a grant naming that
supervisor from any other participant is forged and ignored), and no grant lengthens the lease
past the deploy node's own configured value.

Never unattended: when the supervisor obeyed goes silent, the deploy node streams damping
itself (``OWN_DAMPING``), :data:`TAKEOVER_SILENCE_NS` after the newest TAKEOVER grant was heard,
or ``lease`` + two control periods after the newest WATCHING/ESTOP grant's beat (so no later than
that after the newest such grant was heard), whatever the pattern of its own steps. A supervisor
writes only after the deploy node said it yielded, exited, or lost its lease while the
supervisor kept sending TAKEOVER grants (:mod:`asap_ros.core.supervisor`), so the two never write
at once. A command gap longer than the robot's command timeout (a stall, a slow step) is a
fault: the robot's motors went limp, and the next command is damping. After such a stall the
deploy node writes nothing for one control period without a current grant, while its DDS
threads deliver what queued (:data:`REDISCOVERY_WAIT_NS` after a stall long enough for DDS to
forget it). A held e-stop is released only by a WATCHING grant of the supervisor that granted it
as ESTOP. Pure logic, times passed in (ns, monotonic).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from asap_ros.core.state_machine import Mode

__all__ = [
    "COMMAND_TIMEOUT_NS",
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
"""Cyclone DDS's default participant lease (``CYCLONEDDS_URI`` may set another, which the deploy
node reads: :attr:`WriteLease.dds_lease_ns`): a process stalled this long has been forgotten by
its peers, which must discover it again before its beats reach the supervisor and the
supervisor's grants reach it (measured: about 1 s on loopback)."""
REDISCOVERY_WAIT_NS = 3_000_000_000
"""How long the deploy node waits for the supervisor's word after a stall of at least
:data:`DDS_LEASE_NS` (instead of one control period) before it blames the supervisor's silence."""
TAKEOVER_SILENCE_NS = 60_000_000
"""No TAKEOVER grant heard for this long: the supervisor streaming damping has gone silent, and
the deploy node streams damping itself. The supervisor sends a TAKEOVER grant every step (10 ms)
and stops writing 10 ms after its newest one, so 60 ms leaves the :data:`HANDOVER_GAP_NS`
between its last command and the deploy node's first; damping resumes within 60 ms + one control
period (80 ms) of the supervisor's last grant, 90 ms of its last command: within the robot's
command timeout. The supervisor, in turn, writes no sooner than this after its first TAKEOVER
grant unless the deploy node said it yielded or exited."""
COMMAND_TIMEOUT_NS = 100_000_000
"""The robot's command timeout (the simulated G1's; measure the real one, docs/operating.md): a
gap between two commands longer than this and its motors went limp."""


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
_ESTOP_UNANSWERED = ("an e-stop was just taken and the supervisor has not yet answered since "
                     "(reset the supervisor first if it holds one)")


@dataclass
class _Bound:
    """The supervisor obeyed and its newest grant."""

    supervisor: int
    participant: bytes
    """The DDS participant its grants come from: grants in its name from any other are forged."""
    grant: Grant
    heard_ns: int
    """When its newest grant was taken (this process's clock)."""
    named: bool
    """It has named this process in a grant (before that, its silence towards it is no fault)."""


@dataclass
class WriteLease:
    """The deploy side: beats sent, the supervisor obeyed, and the verdict for each control step.

    ``period_ns`` is the control period: ``2 * period_ns`` before a lease runs out unanswered the
    deploy node latches DAMPING itself, so its last leased commands are damping. ``lease_ns`` is
    its own configured lease, the most any grant may give; ``command_timeout_ns`` the robot's.
    """

    session: int
    period_ns: int
    lease_ns: int = 150_000_000
    command_timeout_ns: int = COMMAND_TIMEOUT_NS
    dds_lease_ns: int = DDS_LEASE_NS
    """Its DDS participant lease (:func:`asap_ros.runtime.dds_lease.configured_lease_ns`)."""
    history: int = 512
    _sent_ns: list[int] = field(init=False)
    _sent_seq: list[int] = field(init=False)
    _bound: _Bound | None = field(default=None, init=False)
    _estop_held: str | None = field(default=None, init=False)
    _estop_by: tuple[int, bytes] = field(default=(0, b""), init=False)
    """The supervisor (session, DDS participant) whose ESTOP grant set :attr:`estop_held`: only its
    WATCHING grant releases it."""
    _estop_taken_ns: int | None = field(default=None, init=False)
    """When this process took an e-stop (its service): Reset is refused until a grant answers a
    beat sent after it (the supervisor's word on that e-stop, held or not)."""
    _last_verdict_ns: int | None = field(default=None, init=False)
    _last_write_ns: int | None = field(default=None, init=False)
    _resumed_ns: int | None = field(default=None, init=False)
    """When this process came back from a stall of its own (no verdict for longer than the
    command timeout): without a current grant it writes nothing for one control period
    (:data:`REDISCOVERY_WAIT_NS` after a stall of :data:`DDS_LEASE_NS`) while queued grants arrive."""
    _stalled_ns: int = field(default=0, init=False)
    _rediscovering: bool = field(default=False, init=False)
    ignored_grants: int = field(default=0, init=False)
    """Grants of supervisors other than the one obeyed."""
    forged_grants: int = field(default=0, init=False)
    """Grants in the obeyed supervisor's name from another DDS participant."""
    last_verdict: Verdict = field(default=_NO_GRANT, init=False)

    def __post_init__(self) -> None:
        if self.session <= 0:
            raise ValueError("session must be a positive id")
        if self.period_ns <= 0:
            raise ValueError("period_ns must be positive")
        if self.lease_ns <= 2 * self.period_ns:
            raise ValueError("lease_ns must be longer than two control periods")
        self._sent_ns = [0] * self.history
        self._sent_seq = [-1] * self.history

    @property
    def supervisor(self) -> int:
        """The supervisor obeyed (0: none)."""
        return self._bound.supervisor if self._bound is not None else 0

    @property
    def obeyed_participant(self) -> bytes | None:
        """The DDS participant of the supervisor obeyed (None: none)."""
        return self._bound.participant if self._bound is not None else None

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

    def receive_all(self, grants: list[tuple[Grant, bytes]], now_ns: int) -> None:
        """Every grant taken from the bus in one step, each with its writer's participant: the
        obeyed supervisor's first, so that a silence of its own that ends in this batch (a receive
        path held up) keeps its binding before any other sender's grant could take it."""
        obeyed = self.obeyed_participant
        for grant, participant in sorted(grants, key=lambda item: item[1] != obeyed):
            self.receive(grant, participant, now_ns)

    def receive(self, grant: Grant, participant: bytes, now_ns: int) -> None:
        """A grant taken from the bus at ``now_ns``, written by DDS participant ``participant``:
        kept if it is the obeyed supervisor's, from that supervisor's participant (or, when none is
        obeyed or the obeyed one has been silent for a lease, binds to its sender). Its lease is
        cut to :attr:`lease_ns`."""
        if grant.lease_ns > self.lease_ns:
            grant = Grant(grant.state, grant.supervisor, grant.session, grant.seq, self.lease_ns, grant.reason)
        bound = self._bound
        silent = bound is None or now_ns - bound.heard_ns >= bound.grant.lease_ns
        if bound is not None and grant.supervisor == bound.supervisor and participant != bound.participant and not silent:
            self.forged_grants += 1
            return
        if bound is None or grant.supervisor == bound.supervisor or silent:
            same = bound is not None and bound.supervisor == grant.supervisor and bound.participant == participant
            named = grant.session == self.session or (same and bound is not None and bound.named)
            self._bound = _Bound(grant.supervisor, participant, grant, now_ns, named)
            if grant.state is Supervision.ESTOP and self._age_ns(grant, now_ns) is not None:
                self._estop_held, self._estop_by = grant.reason or "supervisor e-stop", (grant.supervisor, participant)
            elif grant.state is Supervision.WATCHING and self._current(grant, now_ns) \
                    and (grant.supervisor, participant) == self._estop_by:
                self._estop_held = None  # released at the supervisor that held it
        else:
            self.ignored_grants += 1

    def estop_taken(self, now_ns: int) -> None:
        """This process's e-stop service took an e-stop at ``now_ns`` (perhaps forwarded by a
        supervisor that holds it: its next grants say so)."""
        self._estop_taken_ns = now_ns
        if self.last_verdict.reset_refusal is None:  # a Reset before the next step is refused too
            self.last_verdict = replace(self.last_verdict, reset_refusal=_ESTOP_UNANSWERED)

    def wrote(self, now_ns: int) -> None:
        """A command went out at ``now_ns``."""
        self._last_write_ns = now_ns

    def command_gap_fault(self, now_ns: int) -> str | None:
        """Why a command written at ``now_ns`` must be damping: the previous one went out longer
        than the robot's command timeout before (None: it did not)."""
        last = self._last_write_ns
        if last is None or now_ns - last <= self.command_timeout_ns:
            return None
        return (f"no command for {(now_ns - last) / 1e6:.0f} ms, past the robot's {self.command_timeout_ns / 1e6:g} ms "
                "command timeout (its motors went limp)")

    # --- the step's verdict --------------------------------------------------------------------
    def verdict(self, now_ns: int) -> Verdict:
        """What this step may do; kept as :attr:`last_verdict` (read by other threads)."""
        last = self._last_verdict_ns
        if last is not None and now_ns - last > self.command_timeout_ns:
            self._resumed_ns, self._stalled_ns = now_ns, now_ns - last
            self._rediscovering = now_ns - last >= self.dds_lease_ns
        self._last_verdict_ns = now_ns
        verdict = self._decide(now_ns)
        if self._estop_taken_ns is not None:
            bound = self._bound
            age = self._age_ns(bound.grant, now_ns) if bound is not None else None
            if age is not None and age != _LONG_AGO_NS and now_ns - age > self._estop_taken_ns:
                self._estop_taken_ns = None  # a grant answered a beat sent after the e-stop
            elif verdict.reset_refusal is None:
                verdict = replace(verdict, reset_refusal=_ESTOP_UNANSWERED)
        self.last_verdict = verdict
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
        wait_ns = REDISCOVERY_WAIT_NS if self._rediscovering else self.period_ns
        waiting = self._resumed_ns is not None and now_ns - self._resumed_ns < wait_ns
        if grant.state is Supervision.TAKEOVER:
            reason = f"supervisor took over rt/lowcmd ({grant.reason})"
            if now_ns - bound.heard_ns < TAKEOVER_SILENCE_NS or waiting:
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
        stalled = self._stall_fault(now_ns)
        if age_ns >= grant.lease_ns:
            silent = self._silence(age_ns, bound, now_ns)
            if waiting:  # a withheld step: its own stall, not the supervisor, aged the grant
                return Verdict(Writer.NONE, fault=stalled or silent, refusal=_NO_CURRENT_GRANT,
                               reset_refusal=_NO_CURRENT_GRANT)
            if age_ns >= grant.lease_ns + self.margin_ns:
                return self._own_damping(now_ns, silent)
            return Verdict(Writer.NONE, fault=silent, refusal=_NO_CURRENT_GRANT, reset_refusal=_NO_CURRENT_GRANT)
        write_until_ns = now_ns - age_ns + grant.lease_ns
        if self._estop_held is not None:
            held = f"supervisor e-stop held ({self._estop_held}); reset the supervisor first"
            return Verdict(Writer.LEASED, write_until_ns, fault=f"supervisor e-stop ({self._estop_held})",
                           refusal=held, reset_refusal=held)
        if age_ns >= grant.lease_ns - self.margin_ns:
            return Verdict(Writer.LEASED, write_until_ns, fault=stalled or self._silence(age_ns, bound, now_ns),
                           refusal=_NO_CURRENT_GRANT)
        return Verdict(Writer.LEASED, write_until_ns, fault=stalled)

    def _stall_fault(self, now_ns: int) -> str | None:
        """The fault of the step right after a stall of this process past the command timeout."""
        if self._resumed_ns != now_ns:
            return None
        return (f"the control loop stalled {self._stalled_ns / 1e6:.0f} ms, past the robot's "
                f"{self.command_timeout_ns / 1e6:g} ms command timeout")

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
