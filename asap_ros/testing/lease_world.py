"""A simulated robot, deploy node and supervisors on a virtual clock, for the lease explorer.

The real decisions run here unchanged: the deploy node's :class:`~asap_ros.core.lease.WriteLease`
and each supervisor's :class:`~asap_ros.core.supervisor.SupervisorCore`. What the nodes do around
them is modelled as the control loop (:mod:`asap_ros.runtime.control_loop`), the control process's
request gate and the supervisor node (:mod:`asap_ros.ros.supervisor_node`) do it: take every grant,
decide, apply the e-stop and the lease's fault, write if the lease allows the write at its instant,
beat; the supervisor answers beats, steps every 10 ms, forwards e-stops and republishes them on the
``estop`` topic. Events run in time order on one heap (ns, monotonic); nothing sleeps.

A :class:`~asap_ros.testing.schedules.Schedule` says what goes wrong and when; :func:`run` plays it
and returns every rt/lowcmd write and what the operator's requests got, and
:func:`~asap_ros.testing.lease_invariants.check` judges them.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from asap_ros.core.lease import Beat, Grant, Supervision, WriteLease, Writer
from asap_ros.core.state_machine import Mode
from asap_ros.core.supervisor import Authority, SupervisorCore, SupervisorTiming
from asap_ros.testing.schedules import Fault, Schedule

__all__ = ["SHIPPED", "Accepted", "EStopTaken", "Outcome", "WorldTiming", "Write", "run"]

MS = 1_000_000
HOST = 1
DEPLOY_SESSION = 0xD1
ATTACKER = b"attacker"
STIFF = frozenset({Mode.STAND_UP, Mode.HOLD, Mode.PREPARE, Mode.TRACKING})
"""Modes whose commands carry kp > 0."""


@dataclass(frozen=True)
class WorldTiming:
    """The shipped settings (``config/safety.yaml``, ``robot.launch.py``) and the bus's delays."""

    period_ns: int = 20 * MS
    lease_ns: int = 150 * MS
    takeover_after_ns: int = 200 * MS
    estop_obey_ns: int = 60 * MS
    write_period_ns: int = 10 * MS
    command_timeout_ns: int = 100 * MS
    """The robot's own: no command for this long and its motors go limp (the simulated G1's)."""
    delay_ns: tuple[int, int] = (200_000, 1_500_000)
    """One message's delivery delay on loopback, drawn per message: later messages may overtake."""
    compute_ns: tuple[int, int] = (600_000, 2_000_000)
    """A control step's duration without an overrun."""
    wake_jitter_ns: int = 500_000

    @property
    def supervisor(self) -> SupervisorTiming:
        return SupervisorTiming(takeover_after_ns=self.takeover_after_ns, estop_obey_ns=self.estop_obey_ns,
                                lease_ns=self.lease_ns, write_period_ns=self.write_period_ns)


SHIPPED = WorldTiming()


@dataclass(frozen=True)
class Write:
    """One rt/lowcmd command as the robot received it."""

    stamp_ns: int
    writer: str
    damping: bool


@dataclass(frozen=True)
class Accepted:
    """An operator request that a node accepted."""

    stamp_ns: int
    what: str
    """``reset``, ``stand`` or ``start`` (the deploy node's) or ``supervisor reset``."""
    by: str


@dataclass(frozen=True)
class EStopTaken:
    """An e-stop that a node took (its source processed it)."""

    stamp_ns: int
    source: str
    by: str


@dataclass
class Outcome:
    """What happened: the robot's commands, the operator's answers, the e-stops and the faults."""

    schedule: Schedule
    timing: WorldTiming
    writes: list[Write] = field(default_factory=list)
    accepted: list[Accepted] = field(default_factory=list)
    estops: list[EStopTaken] = field(default_factory=list)
    combo: list[tuple[int, int]] = field(default_factory=list)
    """[pressed, released) intervals of the remote's e-stop combo."""
    stopped: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """Per process, the [start, end) intervals in which it ran nothing (a stop) or was busy in one
    overrunning control step: it could not write."""
    killed: dict[str, int] = field(default_factory=dict)
    harmful_kills: list[int] = field(default_factory=list)
    """Kills of the deploy node, or of a supervisor that had authority when it died."""
    started: dict[str, int] = field(default_factory=dict)
    forged_bound: list[int] = field(default_factory=list)
    """Instants at which the deploy node's lease began to obey the attacker's grants."""
    end_ns: int = 0


class _Process:
    def __init__(self, world: World, name: str, started_ns: int) -> None:
        self.world, self.name, self.started_ns = world, name, started_ns
        self.killed_ns: int | None = None

    def alive(self, now_ns: int) -> bool:
        return now_ns >= self.started_ns and (self.killed_ns is None or now_ns < self.killed_ns)


class World:
    """The event heap, the processes and what the robot received."""

    def __init__(self, schedule: Schedule, timing: WorldTiming) -> None:
        self.schedule, self.timing = schedule, timing
        self.rng = random.Random(schedule.seed)
        self.out = Outcome(schedule, timing)
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self.now_ns = 0
        self.stops: dict[str, list[tuple[int, int]]] = {}
        self.deaf: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self.loss: list[tuple[str, int, int, float]] = []
        self.extra_delay: list[tuple[int, int, int]] = []
        self.deploy = DeployNode(self)
        self.supervisors: list[SupervisorNode] = []
        self.attacker: Attacker | None = None
        self._presses = 0

    @property
    def combo_held(self) -> bool:
        return self._presses > 0

    def press(self, change: int) -> None:
        """One press of the combo begins (+1) or ends (-1); presses may overlap."""
        self._presses += change

    # --- the clock -------------------------------------------------------------------------
    def at(self, when_ns: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (when_ns, next(self._order), action))

    def run_until(self, end_ns: int) -> None:
        while self._heap and self._heap[0][0] < end_ns:
            when, _, action = heapq.heappop(self._heap)
            self.now_ns = when
            action()
        self.now_ns = end_ns

    # --- processes: when they run ------------------------------------------------------------
    def resumes(self, name: str, when_ns: int) -> int:
        """The first instant at or after ``when_ns`` at which process ``name`` runs."""
        moved = True
        while moved:
            moved = False
            for start, end in self.stops.get(name, ()):
                if start <= when_ns < end:
                    when_ns, moved = end, True
        return when_ns

    def stop(self, name: str, start_ns: int, end_ns: int) -> None:
        if end_ns > start_ns:
            self.stops.setdefault(name, []).append((start_ns, end_ns))
            self.out.stopped.setdefault(name, []).append((start_ns, end_ns))

    # --- the bus ---------------------------------------------------------------------------
    def send(self, topic: str, to: _Process, deliver: Callable[[], None], best_effort: bool = False) -> None:
        """A message on ``topic`` for ``to``: delivered after a drawn delay, later while ``to`` is
        stopped or its receive path for ``topic`` is held up; lost if best effort in a loss window."""
        now = self.now_ns
        if best_effort:
            for lost_topic, start, end, share in self.loss:
                if lost_topic in (topic, "all") and start <= now < end and self.rng.random() < share:
                    return
        low, high = self.timing.delay_ns
        when = now + self.rng.randint(low, high)
        for start, end, extra in self.extra_delay:
            if start <= now < end:
                when += self.rng.randint(0, extra)
        held = self.deaf.get((to.name, topic), []) + self.deaf.get((to.name, "all"), [])
        moved = True
        while moved:
            moved = False
            for start, end in held:
                if start <= when < end:
                    when, moved = end, True
            later = self.resumes(to.name, when)
            if later != when:
                when, moved = later, True

        def arrive() -> None:
            if to.alive(self.now_ns):
                deliver()
        self.at(when, arrive)

    def robot_receives(self, writer: str, damping: bool) -> None:
        self.out.writes.append(Write(self.now_ns, writer, damping))
        for sup in self.supervisors:
            if sup.name != writer:
                self.send("lowcmd", sup, lambda s=sup: s.core.on_lowcmd(writer.encode(), damping, self.now_ns),
                          best_effort=True)

    def live_supervisors(self) -> list[SupervisorNode]:
        return [s for s in self.supervisors if s.alive(self.now_ns)]


class DeployNode(_Process):
    """The deploy node: its control loop, e-stop service and request gate, around a WriteLease."""

    def __init__(self, world: World) -> None:
        super().__init__(world, "deploy", 0)
        self.lease = WriteLease(session=DEPLOY_SESSION, period_ns=world.timing.period_ns)
        self.mode = Mode.PASSIVE
        self.seq = 0
        self.inbox: list[tuple[Grant, bytes]] = []
        self.overruns: list[tuple[int, int, float, int]] = []
        """[start, end) windows in which a step overruns with a share and up to a length (ns)."""

    def start(self) -> None:
        self.world.at(0, self.step)

    def step(self) -> None:
        world, timing = self.world, self.world.timing
        if not self.alive(world.now_ns):
            return
        now = world.now_ns
        obeyed = self.lease.obeyed_participant
        self.lease.receive_all(self.inbox, now)
        if self.lease.obeyed_participant == ATTACKER and obeyed != ATTACKER:
            world.out.forged_bound.append(now)
        self.inbox.clear()
        verdict = self.lease.verdict(now)
        if verdict.fault is not None and self.mode is not Mode.DAMPING:
            self.mode = Mode.DAMPING
        compute = world.rng.randint(*timing.compute_ns)
        for start, end, share, longest in self.overruns:
            if start <= now < end and world.rng.random() < share:
                compute = timing.period_ns + world.rng.randint(MS // 4, longest)
        write_at = world.resumes(self.name, now + compute)
        if compute > timing.period_ns:
            world.out.stopped.setdefault(self.name, []).append((now, now + compute))
        seq = self.seq = self.seq + 1

        def finish() -> None:
            if not self.alive(world.now_ns):
                return
            t = world.now_ns
            wrote = self.lease.allows_write(t)
            if wrote:
                if self.lease.command_gap_fault(t) is not None:
                    self.mode = Mode.DAMPING  # the motors went limp: damping, latched
                damping = self.mode not in STIFF or verdict.writer is Writer.OWN_DAMPING
                self.write(t, damping)
            elif verdict.may_write and self.mode is not Mode.DAMPING:
                self.mode = Mode.DAMPING  # the step outlived its lease
            self.lease.beat(seq, t)
            beat = Beat(DEPLOY_SESSION, seq, self.mode, self.lease.supervisor,
                        self.lease.beat_flags(wrote, hears_robot=True), 4242, HOST)
            for sup in world.supervisors:
                world.send("beat", sup, lambda s=sup: s.on_beat(beat, b"deploy"), best_effort=True)
            nxt = (t // timing.period_ns + 1) * timing.period_ns + world.rng.randint(0, timing.wake_jitter_ns)
            world.at(world.resumes(self.name, nxt), self.step)
        world.at(write_at, finish)

    def write(self, now_ns: int, damping: bool) -> None:
        self.lease.wrote(now_ns)
        self.world.robot_receives(self.name, damping)

    def take_grant(self, grant: Grant, participant: bytes) -> None:
        self.inbox.append((grant, participant))

    def estop_service(self, source: str, reply: Callable[[], None] | None = None) -> None:
        """The e-stop service (its own executor thread): DAMPING latched, damping written at once if
        the lease allows a write now."""
        world = self.world
        self.mode = Mode.DAMPING
        self.lease.estop_taken(world.now_ns)
        if source == "deploy service":
            world.out.estops.append(EStopTaken(world.now_ns, source, self.name))
        if self.lease.allows_write(world.now_ns):
            self.write(world.now_ns, True)
        if reply is not None:
            reply()

    def request(self, what: str) -> None:
        """An operator request, gated as the control process gates it, then the mode table."""
        verdict = self.lease.last_verdict
        objection = verdict.reset_refusal if what == "reset" else verdict.refusal
        if objection is not None:
            return
        wanted = {"reset": (Mode.DAMPING, Mode.PASSIVE), "stand": (Mode.PASSIVE, Mode.HOLD),
                  "start": (Mode.HOLD, Mode.TRACKING)}[what]
        if self.mode is wanted[0]:
            self.mode = wanted[1]
            self.world.out.accepted.append(Accepted(self.world.now_ns, what, self.name))


class SupervisorNode(_Process):
    """The supervisor node: watchdog steps, beat answers, e-stop forwarding, the remote's combo."""

    def __init__(self, world: World, name: str, session: int, started_ns: int) -> None:
        super().__init__(world, name, started_ns)
        self.core = SupervisorCore(session, world.timing.supervisor, HOST, started_ns=started_ns)
        self.forward_in_flight = False

    def start(self) -> None:
        self.world.at(self.world.resumes(self.name, self.started_ns), self.step)

    def step(self) -> None:
        world = self.world
        if not self.alive(world.now_ns):
            return
        now = world.now_ns
        held = world.deaf.get((self.name, "lowstate"), []) + world.deaf.get((self.name, "all"), [])
        if not any(start <= now < end for start, end in held):
            if self.core.remote(world.combo_held, "remote combo", now):
                world.out.estops.append(EStopTaken(now, "remote combo", self.name))
                if not self.core.has_authority:
                    self.republish()
                self.forward()
        tick = self.core.step(now)
        if tick.grant is not None:
            self.publish_grant(tick.grant)
        if tick.allows_write(now):
            world.robot_receives(self.name, True)
            self.core.wrote(now)
        world.at(world.resumes(self.name, now + world.timing.write_period_ns), self.step)

    def publish_grant(self, grant: Grant) -> None:
        world = self.world
        world.send("grant", world.deploy, lambda: world.deploy.take_grant(grant, self.name.encode()))
        for other in world.supervisors:
            if other is not self:
                world.send("grant", other, lambda o=other: o.core.on_grant(grant, self.world.now_ns))

    def on_beat(self, beat: Beat, participant: bytes) -> None:
        grant = self.core.on_beat(beat, participant, self.world.now_ns)
        if grant is not None:
            self.publish_grant(grant)

    def estop(self, source: str, republish: bool = True) -> None:
        """As the node's ``estop``: held at the core (a SECONDARY republishes it), then forwarded."""
        world = self.world
        world.out.estops.append(EStopTaken(world.now_ns, source, self.name))
        held = self.core.estop(source, world.now_ns)
        if not held and republish:
            self.republish()
        self.forward()

    def republish(self) -> None:
        """On the ``estop`` topic, for the supervisor with authority (every one hears it, this one too)."""
        world = self.world
        for sup in world.supervisors:
            world.send("estop", sup, lambda s=sup: s.estop("estop topic", republish=False))

    def forward(self) -> None:
        world = self.world
        deploy = world.deploy
        if not deploy.alive(world.now_ns) or self.forward_in_flight:
            return
        self.forward_in_flight = True

        def answered() -> None:
            world.send("reply", self, self._forward_done)
        world.send("service", deploy, lambda: deploy.estop_service("supervisor forward", answered))

    def _forward_done(self) -> None:
        self.forward_in_flight = False

    def reset(self) -> None:
        world = self.world
        unanswered = "/asap_deploy/estop" if self.forward_in_flight else None
        authority = self.core.authority
        if self.core.reset(world.now_ns, unanswered) is None and authority not in (Authority.SECONDARY,
                                                                                   Authority.LISTENING):
            world.out.accepted.append(Accepted(world.now_ns, "supervisor reset", self.name))


class Attacker(_Process):
    """A participant on the robot's domain that forges grants (in the name of the supervisor the
    deploy node obeys, granting the newest beat it heard, lease 10 s) and beats."""

    def __init__(self, world: World, started_ns: int, end_ns: int) -> None:
        super().__init__(world, "attacker", started_ns)
        self.end_ns = end_ns

    def start(self) -> None:
        self.world.at(self.started_ns, self.step)

    def step(self) -> None:
        world = self.world
        now = world.now_ns
        if now >= self.end_ns:
            return
        deploy = world.deploy
        supervisor = deploy.lease.supervisor or 0x51
        grant = Grant(Supervision.WATCHING, supervisor, DEPLOY_SESSION, deploy.seq, 10_000 * MS, "")
        world.send("grant", deploy, lambda: deploy.take_grant(grant, ATTACKER))
        beat = Beat(DEPLOY_SESSION, deploy.seq, Mode.PASSIVE, supervisor, deploy.lease.beat_flags(False, True), 4242,
                    HOST)
        for sup in world.supervisors:
            world.send("beat", sup, lambda s=sup: s.on_beat(beat, ATTACKER), best_effort=True)
        world.at(now + 10 * MS, self.step)


# --- playing a schedule ----------------------------------------------------------------------
def run(schedule: Schedule, timing: WorldTiming = SHIPPED) -> Outcome:
    """Play ``schedule`` and return what the robot and the operator got."""
    world = World(schedule, timing)
    world.deploy.start()
    world.out.started["deploy"] = 0
    sessions = itertools.count(0x51)
    for index in range(schedule.supervisors):
        start = schedule.second_start_ns if index == 1 else 0
        sup = SupervisorNode(world, f"supervisor{index}", next(sessions), start)
        world.supervisors.append(sup)
        world.out.started[sup.name] = start
        sup.start()
    for fault in schedule.faults:
        _apply(world, fault, sessions)
    world.run_until(schedule.end_ns)
    world.out.end_ns = schedule.end_ns
    return world.out


def _process(world: World, who: str) -> _Process | None:
    if who == "deploy":
        return world.deploy
    return next((s for s in world.supervisors if s.name == who), None)


def _apply(world: World, fault: Fault, sessions: itertools.count[int]) -> None:
    """Put one fault on the heap (or on the bus's tables)."""
    kind, at, until = fault.kind, fault.at_ns, fault.at_ns + fault.duration_ns
    if kind == "kill":
        proc = _process(world, fault.who)
        if proc is not None:
            _kill(world, proc, at)
            if proc is world.deploy:
                for sup in world.supervisors:  # the pid watch on the same host
                    world.at(at + MS, lambda s=sup: s.core.on_exit(4242, world.now_ns) if s.alive(world.now_ns) else None)
    elif kind == "stop":
        world.stop(fault.who, at, until)
    elif kind == "deaf":
        world.deaf.setdefault((fault.who, fault.topic), []).append((at, until))
    elif kind == "loss":
        world.loss.append((fault.topic, at, until, fault.share))
    elif kind == "delay":
        world.extra_delay.append((at, until, fault.length_ns))
    elif kind == "overrun":
        world.deploy.overruns.append((at, until, fault.share, fault.length_ns))
    elif kind == "combo":
        world.out.combo.append((at, until))
        world.at(at, lambda: world.press(1))
        world.at(until, lambda: world.press(-1))
    elif kind == "estop":
        _estop_at(world, fault)
    elif kind in ("reset", "stand", "start", "deploy reset", "supervisor reset"):
        _operator_at(world, fault)
    elif kind == "restart":
        old = _process(world, fault.who)
        if old is not None:
            _kill(world, old, at)
        name = f"{fault.who}+"
        sup = SupervisorNode(world, name, next(sessions), until)
        world.supervisors.append(sup)
        world.out.started[name] = until
        sup.start()
    elif kind == "attack":
        world.attacker = Attacker(world, at, until)
        world.attacker.start()
    else:
        raise ValueError(f"unknown fault kind {kind!r}")


def _kill(world: World, proc: _Process, at_ns: int) -> None:
    proc.killed_ns = at_ns
    world.out.killed[proc.name] = at_ns

    def judge() -> None:
        if proc is world.deploy or world.deploy.lease.obeyed_participant == proc.name.encode():
            world.out.harmful_kills.append(at_ns)
    world.at(at_ns, judge)


def _estop_at(world: World, fault: Fault) -> None:
    source = fault.topic

    def fire() -> None:
        if source == "deploy":
            deploy = world.deploy
            world.send("service", deploy, lambda: deploy.estop_service("deploy service"))
        elif source == "topic":
            for sup in world.supervisors:
                world.send("estop", sup, lambda s=sup: s.estop("estop topic", republish=False))
        else:
            sup = _process(world, fault.who)
            if isinstance(sup, SupervisorNode):
                world.send("service", sup, lambda: sup.estop(f"{source} at {sup.name}"))
    world.at(fault.at_ns, fire)


def _operator_at(world: World, fault: Fault) -> None:
    """``ctl reset`` (the named supervisor's reset, then the deploy node's), or one service."""
    kind = fault.kind

    def fire() -> None:
        deploy = world.deploy
        if kind in ("stand", "start", "deploy reset"):
            what = "reset" if kind == "deploy reset" else kind
            world.send("service", deploy, lambda: deploy.request(what))
            return
        sup = _process(world, fault.who)
        if isinstance(sup, SupervisorNode) and sup.alive(world.now_ns):
            world.send("service", sup, sup.reset)
        if kind == "reset":
            world.at(world.now_ns + 5 * MS, lambda: world.send("service", deploy, lambda: deploy.request("reset")))
    world.at(fault.at_ns, fire)
