"""The supervisor's decisions: authority, grants, takeover, held e-stops, hand-back.

:class:`SupervisorCore` is pure: the supervisor node feeds it what it hears (beats, rt/lowcmd
samples with their writer's participant, other supervisors' grants, process exits, e-stops, the
remote's combo, resets) and calls :meth:`SupervisorCore.step` every ``write_period_ns`` (10 ms) on
its watchdog thread, as ros2_control calls ``update(time, period)``. Real-time contract of every
method: no I/O, no allocation beyond small records, bounded work; times are the monotonic clock
in ns, passed in. The node sends the grants and writes the damping :class:`Tick` asks for, in that
order. The protocol and the deploy node's side are in :mod:`asap_ros.core.lease`.

Rules:

- **One authority.** A supervisor listens for ``listen_ns`` before it grants. It is SECONDARY
  (an e-stop source that never grants nor writes) while the deploy node obeys another supervisor
  heard within a lease; while the deploy node obeys none (or does not beat), when another
  supervisor grants while it listens or resyncs after a stall of its own, or when one with a
  lower session id grants. A SECONDARY takes authority once no other supervisor was heard for
  ``takeover_after_ns``, and only on fresh input: a beat within :data:`FRESH_BEAT_NS` that shows
  the deploy node has left the old supervisor (it obeys none or this one, or streams damping on
  its own), or the deploy process gone or silent as long; the robot heard within
  :data:`FRESH_ROBOT_NS`; and no rt/lowcmd from a participant other than the deploy node's for
  ``takeover_after_ns``. It
  decides no takeover in the step it takes authority, and counts the deploy node's lease and
  silence from that step.
- **Every e-stop is latched**, whatever the authority: a LISTENING or SECONDARY supervisor
  latches its own, the topic's, the combo's and the deploy node's ESTOP_HELD beats, republishes
  its own on the ``estop`` topic, and holds them all when it takes authority.
- **Liveness of the one deploy process granted**: rt/lowcmd counts only from the participant
  its beats come from, and beats only from the participant of the first, while it beats; its
  process is watched for exit by the pid its beats carry. A second deploy session gets no grant
  while the first beats.
- **Act only on what it hears**: no "deploy silent" takeover without the robot heard within
  :data:`FRESH_ROBOT_NS` (a supervisor whose receive path is held up decides nothing).
- **Takeover** (stream damping) when that process exits, when it has written and then neither
  writes nor says it writes nothing by design for ``takeover_after_ns``, when it sends no damping
  within ``estop_obey_ns`` of an e-stop, and when it writes kp > 0 while an e-stop is held.
- **Grants** answer every beat at once; while WATCHING one more goes out every step, naming the
  newest beat (it grants nothing new), so other supervisors hear this one while no beat comes.
- **Writes** only in TAKEOVER, each after a TAKEOVER grant, and only once the deploy node cannot
  write: it said it yielded, its process is gone, or its lease ran out while TAKEOVER grants went
  out (and then no sooner than :data:`~asap_ros.core.lease.TAKEOVER_SILENCE_NS` after the
  takeover, so that a deploy node streaming damping on its own hears the TAKEOVER first); and
  :data:`HANDOVER_GAP_NS` after its last command. The write follows the step that
  decided it within one ``write_period_ns`` (:meth:`Tick.allows_write`): a write later than that
  is dropped, as the deploy node drops a step's command that outlived its lease. After a stall of
  its own (no step for ``stall_ns``) the supervisor writes nothing, and sends no TAKEOVER grant,
  for ``resync_ns``: it hears the bus first.
- **A held e-stop**: latched until :meth:`reset`, which is refused while the remote's combo is
  held; ESTOP grants meanwhile, so the deploy node refuses Reset, Stand and Start. An e-stop the
  deploy node holds from an earlier supervisor (its beats say so) is taken over at start-up.
  A deploy node streaming damping on its own (its supervisor died) is granted again and keeps
  damping, latched, until the operator resets it.
- **Hand-back** on :meth:`reset` only to a deploy node that beats now, hears the robot, has
  yielded, and is in PASSIVE or DAMPING; after a handover gap of silence.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from asap_ros.core.lease import HANDOVER_GAP_NS, TAKEOVER_SILENCE_NS, Beat, BeatFlag, Grant, Supervision
from asap_ros.core.state_machine import Mode

__all__ = [
    "ARMED",
    "NOT_UNDER_GRANT",
    "NO_DEPLOY",
    "NO_ROBOT",
    "Authority",
    "DeployView",
    "SupervisorCore",
    "SupervisorTiming",
    "Tick",
    "timing_problem",
]

FRESH_BEAT_NS = 40_000_000
"""A beat younger than this (two control periods) is fresh input for taking authority."""
FRESH_ROBOT_NS = 20_000_000
"""A robot state younger than this (ten 2 ms LowStates) says the receive path works."""
RELEASE_MODES = frozenset({Mode.PASSIVE, Mode.DAMPING})
"""Modes in which the deploy node may get rt/lowcmd back: it applies no stiffness of its own."""
ARMED = "armed (asap_deploy under its grant)"
"""The state's words after ``WATCHING: `` when the deploy node's newest beat obeys this supervisor."""
NOT_UNDER_GRANT = "not armed (asap_deploy heard, not yet under its grant)"
"""... when a deploy node is heard but its verdict came from no grant of this supervisor yet."""
NO_DEPLOY = "not armed (no asap_deploy heard)"
NO_ROBOT = "not armed (no CRC-valid rt/lowstate heard within 20 ms)"
"""... when it does not hear the robot: it could not write damping, nor judge a takeover."""
"""... when no live deploy node is heard."""


class Authority(enum.Enum):
    LISTENING = "hearing the bus before acting"
    WATCHING = "granting the deploy node's lease"
    TAKEOVER = "streaming damping on rt/lowcmd"
    RELEASING = "handing rt/lowcmd back after a handover gap"
    SECONDARY = "another supervisor has authority; e-stop source only"


@dataclass(frozen=True)
class SupervisorTiming:
    takeover_after_ns: int
    estop_obey_ns: int
    lease_ns: int
    write_period_ns: int = 10_000_000
    """The watchdog's step and damping stream period."""
    listen_ns: int = 0
    """Hearing the bus at start-up before granting (default: ``lease_ns`` + two write periods)."""
    handover_gap_ns: int = HANDOVER_GAP_NS
    stall_ns: int = 40_000_000
    """No :meth:`SupervisorCore.step` for this long: the supervisor stalled itself."""
    resync_ns: int = 30_000_000
    """After a stall, no write for this long (its own DDS threads deliver what queued meanwhile)."""

    @property
    def listen(self) -> int:
        return self.listen_ns or self.lease_ns + 2 * self.write_period_ns


def timing_problem(takeover_after_ms: float, lease_ms: float, control_period_ms: float = 20.0) -> tuple[str, str] | None:
    """``(key, problem)`` when the lease would outlive the takeover: a hung deploy node must have
    lost its lease (and latched DAMPING two control periods before) when the supervisor takes over."""
    if not lease_ms < takeover_after_ms:
        return "lease_ms", f"must be shorter than takeover_after_ms ({takeover_after_ms:g} ms): a hung deploy node's lease must have run out at the takeover"
    if lease_ms <= 2 * control_period_ms:
        return "lease_ms", f"must be longer than two control periods ({2 * control_period_ms:g} ms): the deploy node latches DAMPING that long before an unanswered lease runs out"
    return None


@dataclass
class DeployView:
    """The deploy process being supervised, as heard on the bus."""

    session: int
    participant: bytes
    """DDS participant of its beats: its rt/lowcmd writer is in the same one."""
    pid: int
    host: int
    beat: Beat
    beat_ns: int
    granted: bool = False
    """A grant has named it: adoptions from its beats (held e-stop, takeover found) are over."""
    last_lowcmd_ns: int = 0
    alive_ns: int = 0
    """Newest sign of life: a LowCmd from it, or a beat saying it writes nothing by design."""
    wrote: bool = False
    exited: str | None = None
    exited_ns: int = 0
    """When its exit was seen: it wrote nothing after that (its last commands may not all have
    been heard)."""
    kp_while_estop: bool = False
    """It wrote kp > 0 after the e-stop obey window."""
    damping_since_estop: bool = False


@dataclass(frozen=True)
class Tick:
    """What the node does now, in this order: send ``grant``, then write damping if ``write`` and
    :meth:`allows_write` at the instant of the write."""

    grant: Grant | None
    write: bool
    next_ns: int
    """When to step again at the latest."""
    write_until_ns: int = 0
    """A damping write at or after this instant (monotonic, ns) is dropped: the process stalled
    between the step and the write. The step's time + one ``write_period_ns`` (10 ms): the deploy
    node streams damping itself only once its newest TAKEOVER grant names a beat
    :data:`~asap_ros.core.lease.TAKEOVER_SILENCE_NS` (70 ms) old, and the grant sent with this
    step names a beat at most one control period (20 ms) old, so a write within 10 ms of the step
    ends at least 40 ms before that: more than :data:`HANDOVER_GAP_NS` (30 ms)."""

    def allows_write(self, now_ns: int) -> bool:
        """Whether the damping write this tick asks for may go out at ``now_ns``."""
        return self.write and now_ns < self.write_until_ns


@dataclass
class SupervisorCore:
    """The decisions of one supervisor (session ``session``, on host ``host``)."""

    session: int
    timing: SupervisorTiming
    host: int
    started_ns: int
    authority: Authority = Authority.LISTENING
    reason: str = ""
    """Why TAKEOVER (or SECONDARY: who has authority)."""
    deploy: DeployView | None = None
    estop_reason: str | None = None
    """The held e-stop (None: none)."""
    estop_since_ns: int = 0
    combo_held: bool = False
    foreign_writers: set[bytes] = field(default_factory=set)
    """Participants other than the deploy node's that wrote rt/lowcmd (a rogue or stray writer)."""
    events: list[str] = field(default_factory=list)
    """What happened since the node last drained it (log lines)."""
    forged_beats: int = 0
    """Beats in the supervised deploy session's name from another participant, ignored."""
    _robot_ns: int = 0
    """When the newest robot state was read (0: none yet)."""
    _promoted_ns: int = 0
    _foreign_ns: int = 0
    """When rt/lowcmd was last heard from a participant other than the deploy node's."""
    _others: dict[int, tuple[int, Supervision]] = field(default_factory=dict)
    """Other supervisors' sessions -> when their newest grant was heard, and its state."""
    _last_step_ns: int = 0
    _resync_until_ns: int = 0
    _takeover_ns: int = 0
    _lease_bound_ns: int = 0
    """When the beat named in the newest WATCHING grant arrived: the deploy node's lease from it
    runs out by then + ``lease_ns`` (it went out earlier still)."""
    _last_write_ns: int = 0
    _yield_seen: bool = False
    _release_at_ns: int = 0

    # --- inputs --------------------------------------------------------------------------
    def on_beat(self, beat: Beat, participant: bytes, now_ns: int) -> Grant | None:
        """A deploy beat; the grant to answer it with now (None: no answer)."""
        self._notice_stall(now_ns)
        deploy = self.deploy
        beating = deploy is not None and deploy.exited is None and \
            now_ns - deploy.beat_ns < self.timing.lease_ns + self.timing.handover_gap_ns
        if deploy is not None and beat.session == deploy.session and participant != deploy.participant and beating:
            self.forged_beats += 1
            return None  # its session from another participant while it beats: forged
        if deploy is None or beat.session != deploy.session:
            if beating:
                return None  # a second deploy process while the first still beats: never two leases
            deploy = self.deploy = DeployView(beat.session, participant, beat.pid, beat.host, beat, now_ns)
            self._yield_seen = False  # the previous process's word says nothing of this one
            self._event(f"supervising asap_deploy session {beat.session:x} (pid {beat.pid})")
        deploy.beat, deploy.beat_ns, deploy.participant = beat, now_ns, participant
        if not beat.flags & BeatFlag.WRITING:
            deploy.alive_ns = now_ns
        if self.estop_reason is not None and self.estop_since_ns and beat.mode is Mode.DAMPING \
                and not beat.flags & BeatFlag.WRITING:
            deploy.damping_since_estop = True  # it writes nothing at all: no stiffness to remove
        if self.authority is Authority.TAKEOVER:
            if beat.flags & BeatFlag.WRITING:
                self._yield_seen = False
            elif beat.flags & BeatFlag.YIELDED and beat.supervisor == self.session:
                self._yield_seen = True
        if not deploy.granted or self.authority in (Authority.SECONDARY, Authority.LISTENING):
            self._adopt(beat)
        return self._answer(beat, now_ns)

    def on_lowcmd(self, participant: bytes, damping: bool, now_ns: int) -> None:
        """An rt/lowcmd sample of another participant (``damping``: kp 0 on every motor)."""
        deploy = self.deploy
        if deploy is None or participant != deploy.participant:
            self._foreign_ns = now_ns
            if participant not in self.foreign_writers:
                self.foreign_writers.add(participant)
                self._event(f"rt/lowcmd written by a participant other than asap_deploy's ({participant.hex()[:16]})")
            return
        deploy.last_lowcmd_ns = deploy.alive_ns = max(deploy.last_lowcmd_ns, now_ns)
        deploy.wrote = True
        if self.estop_reason is not None and self.estop_since_ns and now_ns >= self.estop_since_ns:
            if damping:
                deploy.damping_since_estop = True
            elif now_ns - self.estop_since_ns >= self.timing.estop_obey_ns:
                deploy.kp_while_estop = True

    def on_grant(self, grant: Grant, now_ns: int) -> None:
        """A grant heard on the bus: another supervisor's, when it names another session."""
        if grant.supervisor != self.session:
            self._others[grant.supervisor] = (now_ns, grant.state)

    def on_exit(self, pid: int, now_ns: int) -> None:
        """The process ``pid`` (announced in the deploy node's beats) exited."""
        deploy = self.deploy
        if deploy is not None and deploy.pid == pid and deploy.exited is None:
            deploy.exited, deploy.exited_ns = f"deploy process {pid} exited", now_ns

    def estop(self, source: str, now_ns: int) -> bool:
        """An e-stop from ``source``: held until :meth:`reset`, whatever the authority. False when
        this supervisor has no authority (LISTENING, SECONDARY): the node also republishes it on
        the ``estop`` topic for the one that has."""
        self.estop_reason = f"e-stop from {source}"
        self.estop_since_ns = now_ns
        if self.deploy is not None:
            self.deploy.damping_since_estop = self.deploy.kp_while_estop = False
        return self.has_authority

    def remote(self, held: bool, source: str, now_ns: int) -> bool:
        """The remote's combo, from each robot state read (CRC valid); True when it was just
        pressed (an e-stop)."""
        self._robot_ns = now_ns
        pressed = held and not self.combo_held
        self.combo_held = held
        if pressed:
            self.estop(source, now_ns)
        return pressed

    def reset(self, now_ns: int, unanswered_forward: str | None = None) -> str | None:
        """The operator's reset: release a held e-stop and hand a takeover back; the refusal, or None.

        ``unanswered_forward`` names the deploy node's e-stop service while the e-stop forwarded
        to it is unanswered: a held e-stop is not released before the deploy node applied it
        (a stalled node gets the request when it resumes, DDS retransmitting it seconds later)."""
        if self.authority is Authority.SECONDARY:
            return f"this supervisor has no authority ({self.reason}); reset that one"
        if self.authority is Authority.LISTENING:
            return "still starting (hearing the bus); try again in a moment"
        if self.combo_held:
            return "the e-stop combo is held on the remote; release it first"
        if unanswered_forward is not None and self.estop_reason is not None:
            return (f"the deploy node has not yet answered the e-stop forwarded to {unanswered_forward} "
                    "(a stopped node gets it when it resumes; a node that exited no longer blocks this)")
        if self.authority is Authority.TAKEOVER:
            refusal = self.release_refusal(now_ns)
            if refusal is not None:
                return refusal
            self.authority, self.reason = Authority.RELEASING, ""
            self._release_at_ns = max(now_ns, self._last_write_ns + self.timing.handover_gap_ns)
            self._event("reset: handing rt/lowcmd back after a handover gap")
        elif self.estop_reason is None and self.authority is not Authority.RELEASING:
            return None
        if self.estop_reason is not None:
            self._event(f"reset: {self.estop_reason} released")
        self.estop_reason, self.estop_since_ns = None, 0
        return None

    def release_refusal(self, now_ns: int) -> str | None:
        """Why a reset may not hand rt/lowcmd back now (None: it may)."""
        deploy = self.deploy
        if deploy is None:
            return "no deploy node heard"
        if deploy.exited:
            return deploy.exited
        if now_ns - deploy.beat_ns >= self.timing.lease_ns:
            return "no beat from the deploy node's control loop"
        beat = deploy.beat
        if beat.mode not in RELEASE_MODES:
            return f"the deploy node is in {beat.mode.name}; it must be in PASSIVE or DAMPING (e-stop or reset it first)"
        if not beat.flags & BeatFlag.YIELDED or beat.supervisor != self.session:
            return "the deploy node has not yet acknowledged the takeover"
        if not beat.flags & BeatFlag.HEARS_ROBOT:
            return "the deploy node does not hear the robot (no fresh rt/lowstate)"
        return None

    # --- the watchdog's step ---------------------------------------------------------------
    def step(self, now_ns: int) -> Tick:
        """Decide at ``now_ns``: authority, takeover, the grant to send and whether to write."""
        timing = self.timing
        self._notice_stall(now_ns)
        self._last_step_ns = now_ns
        resyncing = now_ns < self._resync_until_ns
        self._settle_authority(now_ns)
        if self.authority is Authority.WATCHING and not resyncing and now_ns != self._promoted_ns:
            reason = self._takeover_reason(now_ns)
            if reason is not None:
                self.take_over(reason, now_ns)
        if self.authority is Authority.RELEASING and now_ns >= self._release_at_ns:
            self.authority = Authority.WATCHING
        next_ns = now_ns + timing.write_period_ns
        if self.authority is Authority.WATCHING:  # heard by other supervisors even while no beat comes
            return Tick(self._grant(*self._watching()), False, next_ns)
        if self.authority is not Authority.TAKEOVER or resyncing:
            return Tick(None, False, next_ns)  # a TAKEOVER grant after its own stall waits: another may stream now
        grant = self._grant(Supervision.TAKEOVER, self.reason)
        return Tick(grant, not resyncing and self._may_write(now_ns), next_ns, now_ns + timing.write_period_ns)

    def _notice_stall(self, now_ns: int) -> None:
        """No step for ``stall_ns``: this supervisor stalled; it hears the bus for ``resync_ns``
        (answers no beat, writes nothing) before it acts again."""
        if self._last_step_ns and now_ns - self._last_step_ns > self.timing.stall_ns:
            self._event(f"supervisor stalled {(now_ns - self._last_step_ns) / 1e6:.0f} ms: hearing the bus "
                        f"for {self.timing.resync_ns / 1e6:g} ms before writing")
            self._resync_until_ns = now_ns + self.timing.resync_ns
            self._last_step_ns = now_ns

    def wrote(self, now_ns: int) -> None:
        """The node wrote the damping command the last :class:`Tick` asked for."""
        self._last_write_ns = now_ns

    def take_over(self, reason: str, now_ns: int) -> None:
        self.authority, self.reason = Authority.TAKEOVER, reason
        self._takeover_ns, self._yield_seen = now_ns, False
        self._event(f"taking over rt/lowcmd with damping: {reason}")

    # --- outputs -----------------------------------------------------------------------------
    @property
    def has_authority(self) -> bool:
        """Whether it grants (or streams damping): an e-stop it latches is held at the deploy node."""
        return self.authority not in (Authority.SECONDARY, Authority.LISTENING)

    def describe(self, now_ns: int | None = None) -> str:
        """The latched state line: ``AUTHORITY: detail`` (at ``now_ns``: whether it hears the robot)."""
        if self.authority is Authority.TAKEOVER:
            return f"TAKEOVER: {self.reason}"
        if self.authority is Authority.SECONDARY:
            return f"SECONDARY: {self.reason}"
        held = f"; {self.estop_reason} held" if self.estop_reason else ""
        return f"{self.authority.name}: {self._armed(now_ns)}{held}"

    def _armed(self, now_ns: int | None) -> str:
        """Armed: it hears the robot (a CRC-valid state within :data:`FRESH_ROBOT_NS`) and the
        deploy node's newest beat obeys this supervisor's grant (its step's verdict came from that
        grant, not from its own damping), so a takeover or an e-stop granted now is obeyed. A
        deploy node heard but bound to no grant of this supervisor yet is not armed."""
        if now_ns is not None and (not self._robot_ns or now_ns - self._robot_ns >= FRESH_ROBOT_NS):
            return NO_ROBOT
        deploy = self.deploy
        if deploy is None or deploy.exited is not None:
            return NO_DEPLOY
        if deploy.beat.supervisor != self.session or deploy.beat.flags & BeatFlag.TOOK_BACK:
            return NOT_UNDER_GRANT
        return ARMED

    def drain_events(self) -> list[str]:
        events, self.events = self.events, []
        return events

    # --- rules ---------------------------------------------------------------------------------
    def _adopt(self, beat: Beat) -> None:
        """Before its first grant to this deploy process: take over the e-stop it holds from an
        earlier supervisor. (A deploy node streaming damping on its own after its supervisor died
        gets the lease again: it keeps damping, latched, until the operator resets it.)"""
        if beat.flags & BeatFlag.ESTOP_HELD and self.estop_reason is None:
            self.estop_reason, self.estop_since_ns = "e-stop held by asap_deploy (from an earlier supervisor)", 0
            self._event(self.estop_reason)

    def _answer(self, beat: Beat, now_ns: int) -> Grant | None:
        if self.authority is Authority.TAKEOVER or self.authority is Authority.RELEASING:
            if now_ns < self._resync_until_ns:
                return None
            return self._grant(Supervision.TAKEOVER, self.reason or "handing back")
        if self.authority is not Authority.WATCHING:
            return None  # (after a stall of its own it answers too: a grant naming a stale beat grants nothing)
        assert self.deploy is not None  # on_beat set it
        self._lease_bound_ns = self.deploy.beat_ns
        return self._grant(*self._watching())

    def _watching(self) -> tuple[Supervision, str]:
        """The state and reason of a grant while watching: ESTOP while an e-stop is held."""
        return (Supervision.ESTOP, self.estop_reason) if self.estop_reason is not None else (Supervision.WATCHING, "")

    def _grant(self, state: Supervision, reason: str) -> Grant:
        deploy = self.deploy
        if deploy is None:
            return Grant(state, self.session, 0, 0, self.timing.lease_ns, reason)
        deploy.granted = True
        return Grant(state, self.session, deploy.session, deploy.beat.seq, self.timing.lease_ns, reason)

    def _live_others(self, now_ns: int) -> dict[int, Supervision]:
        """Other supervisors heard within a lease, with the state of their newest grant."""
        return {s: state for s, (heard, state) in self._others.items() if now_ns - heard < self.timing.lease_ns}

    def _settle_authority(self, now_ns: int) -> None:
        """Who has authority: the supervisor the deploy node obeys; while it obeys none (or does not
        beat), one streaming damping before one granting, one that heard the bus all along before
        one listening or resyncing, then the lower session."""
        others = self._live_others(now_ns)
        deploy = self.deploy
        obeyed = deploy.beat.supervisor if deploy is not None and now_ns - deploy.beat_ns < self.timing.lease_ns else 0
        if self.authority is Authority.SECONDARY:
            if obeyed == self.session:  # demoted in the instant the deploy node bound to it
                self._promote(now_ns, "asap_deploy obeys this supervisor")
            elif not any(now_ns - heard < self.timing.takeover_after_ns for heard, _ in self._others.values()) \
                    and self._fresh_for_authority(now_ns):
                self._promote(now_ns, "no other supervisor heard")
            return
        if obeyed and obeyed != self.session and obeyed in others:
            self._demote(f"asap_deploy obeys supervisor {obeyed:x}")
            return
        if obeyed or not others:
            if self.authority is Authority.LISTENING and now_ns - self.started_ns >= self.timing.listen:
                self.authority, self._promoted_ns = Authority.WATCHING, now_ns  # it decides from the next step
                self._event("listened: granting")
            return
        streaming = sorted(s for s, state in others.items() if state is Supervision.TAKEOVER)
        if self.authority is Authority.LISTENING or now_ns < self._resync_until_ns:
            self._demote(f"supervisor {min(others):x} is active")
        elif streaming and (self.authority is not Authority.TAKEOVER or streaming[0] < self.session):
            self._demote(f"supervisor {streaming[0]:x} streams damping")
        elif not streaming and self.authority is not Authority.TAKEOVER and min(others) < self.session:
            self._demote(f"supervisor {min(others):x} grants too (the lower session keeps authority)")

    def _fresh_for_authority(self, now_ns: int) -> bool:
        """Whether what it hears now lets a SECONDARY take authority: the robot, and a fresh beat
        showing the deploy node has left the old supervisor (or that process gone, or none heard)."""
        if self._robot_ns and now_ns - self._robot_ns >= FRESH_ROBOT_NS:
            return False
        if self._foreign_ns and now_ns - self._foreign_ns < self.timing.takeover_after_ns:
            return False  # another writer streams: the old supervisor, heard on rt/lowcmd
        deploy = self.deploy
        if deploy is None or deploy.exited is not None or now_ns - deploy.beat_ns >= self.timing.takeover_after_ns:
            return True  # no deploy process, or one gone or hung too: nobody holds a lease to clash with
        beat = deploy.beat
        left = beat.supervisor in (0, self.session) or bool(beat.flags & BeatFlag.TOOK_BACK)
        return left and now_ns - deploy.beat_ns < FRESH_BEAT_NS

    def _promote(self, now_ns: int, why: str) -> None:
        """Take authority: the deploy node may still hold a lease from the old supervisor, so its
        lease and its silence are counted from now; e-stops latched meanwhile are held."""
        self.authority, self.reason, self._promoted_ns = Authority.WATCHING, "", now_ns
        self._lease_bound_ns = now_ns
        if self.deploy is not None:
            self.deploy.alive_ns = max(self.deploy.alive_ns, now_ns)
        held = f"; {self.estop_reason} held" if self.estop_reason else ""
        self._event(f"{why}: taking authority{held}")

    def _demote(self, why: str) -> None:
        if self.authority is not Authority.SECONDARY:
            self._event(f"secondary: {why}; e-stops are forwarded, nothing is granted or written")
        self.authority, self.reason = Authority.SECONDARY, why

    def _takeover_reason(self, now_ns: int) -> str | None:
        deploy = self.deploy
        if deploy is None:
            return None
        if deploy.exited:
            return deploy.exited
        timing = self.timing
        if self.estop_reason is not None and self.estop_since_ns:
            if deploy.kp_while_estop:
                return f"deploy wrote kp > 0 while the e-stop is held ({self.estop_reason})"
            if not deploy.damping_since_estop and now_ns - self.estop_since_ns >= timing.estop_obey_ns:
                return f"deploy did not send damping within {timing.estop_obey_ns / 1e6:g} ms of an e-stop"
        robot_heard = not self._robot_ns or now_ns - self._robot_ns < FRESH_ROBOT_NS
        if deploy.wrote and now_ns - deploy.alive_ns >= timing.takeover_after_ns and robot_heard:
            return f"deploy silent for {(now_ns - deploy.last_lowcmd_ns) / 1e6:.1f} ms (no rt/lowcmd)"
        return None

    def _may_write(self, now_ns: int) -> bool:
        """Whether the deploy node can no longer write: yielded, gone, or out of lease; and a
        handover gap after its last command."""
        deploy = self.deploy
        timing = self.timing
        if deploy is None:
            return True
        if now_ns < max(deploy.last_lowcmd_ns, deploy.exited_ns) + timing.handover_gap_ns:
            return False
        if deploy.exited or self._yield_seen:
            return True
        return now_ns >= self._lease_bound_ns + timing.lease_ns + timing.handover_gap_ns \
            and now_ns >= self._takeover_ns + TAKEOVER_SILENCE_NS

    def _event(self, text: str) -> None:
        if len(self.events) < 100:
            self.events.append(text)
