"""A deterministic bus for the rt/lowcmd lease: one deploy node's :class:`WriteLease` and any number
of :class:`SupervisorCore` s, stepped on a 1 ms grid with delivery delays, stalls (SIGSTOP and
SIGCONT, or within a step) and kills, every rt/lowcmd write recorded with its writer. The deploy node's control
step is modelled as the control loop runs it: take the grants, verdict, write if the verdict
allows it at the write instant, beat."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from asap_ros.core.lease import Beat, Grant, WriteLease, Writer
from asap_ros.core.state_machine import Mode
from asap_ros.core.supervisor import SupervisorCore, SupervisorTiming
from asap_ros.testing.ros_system import max_writers_in_window

MS = 1_000_000
PERIOD = 20 * MS
TIMING = SupervisorTiming(takeover_after_ns=200 * MS, estop_obey_ns=60 * MS, lease_ns=150 * MS)
HOST = 1


@dataclass
class Write:
    stamp_ns: int
    writer: str
    damping: bool


@dataclass
class Process:
    name: str
    stopped: list[tuple[int, int]] = field(default_factory=list)
    """[start, end) intervals in which it runs nothing."""
    killed_ns: int | None = None

    def runs(self, now_ns: int) -> bool:
        if self.killed_ns is not None and now_ns >= self.killed_ns:
            return False
        return not any(start <= now_ns < end for start, end in self.stopped)


@dataclass
class Deploy(Process):
    lease: WriteLease = field(default_factory=lambda: WriteLease(session=0xD1, period_ns=PERIOD))
    mode: Mode = Mode.HOLD
    fault: str | None = None
    seq: int = 0
    next_step_ns: int = 0
    compute_ns: int = 1 * MS
    stall_in_step: dict[int, int] = field(default_factory=dict)
    """seq -> ns stalled between the verdict and the write of that step."""
    inbox: list[tuple[int, Grant]] = field(default_factory=list)
    pid: int = 4242


@dataclass
class Supervisor(Process):
    core: SupervisorCore | None = None
    next_step_ns: int = 0
    inbox: list[tuple[int, str, object]] = field(default_factory=list)
    steps: int = 0
    stall_before_write: dict[int, int] = field(default_factory=dict)
    """step number -> ns stalled between that step (its grant sent) and its damping write."""


class Bus:
    """The deploy node, the supervisors and every rt/lowcmd write."""

    def __init__(self, delay_ns: int = MS // 2) -> None:
        self.delay_ns = delay_ns
        self.now_ns = 0
        self.deploy = Deploy("deploy")
        self.supervisors: list[Supervisor] = []
        self.writes: list[Write] = []
        self._sessions = itertools.count(0x51)

    def add_supervisor(self, name: str = "supervisor", session: int | None = None) -> Supervisor:
        session = next(self._sessions) if session is None else session
        sup = Supervisor(name, core=SupervisorCore(session, TIMING, HOST, started_ns=self.now_ns),
                         next_step_ns=self.now_ns)
        self.supervisors.append(sup)
        return sup

    # --- driving -------------------------------------------------------------------------
    def run_until(self, end_ns: int) -> None:
        while self.now_ns < end_ns:
            self._tick()
            self.now_ns += MS

    def run_for(self, duration_ns: int) -> None:
        self.run_until(self.now_ns + duration_ns)

    def _tick(self) -> None:
        now = self.now_ns
        deploy = self.deploy
        if deploy.runs(now) and now >= deploy.next_step_ns:
            ended = self._deploy_step(now)
            deploy.next_step_ns = (ended // PERIOD + 1) * PERIOD  # a stalled step skips whole periods
        for sup in self.supervisors:
            if sup.runs(now):
                self._deliver_to_supervisor(sup, now)
                if now >= sup.next_step_ns:
                    self._supervisor_step(sup, now)
                    sup.next_step_ns = now + TIMING.write_period_ns
        if deploy.killed_ns is not None and now == deploy.killed_ns + MS:
            for sup in self.supervisors:
                sup.inbox.append((now, "exit", deploy.pid))

    def _deploy_step(self, now: int) -> int:
        """One control step starting at ``now``; returns when it ended."""
        deploy = self.deploy
        for at, grant in deploy.inbox:
            if at <= now:
                deploy.lease.receive(grant, b"supervisor", now)
        deploy.inbox = [(at, g) for at, g in deploy.inbox if at > now]
        verdict = deploy.lease.verdict(now)
        if verdict.fault is not None and deploy.mode is not Mode.DAMPING:
            deploy.mode, deploy.fault = Mode.DAMPING, verdict.fault
        deploy.seq += 1
        write_at = now + deploy.compute_ns + deploy.stall_in_step.get(deploy.seq, 0)
        wrote = deploy.runs(write_at) and deploy.lease.allows_write(write_at)
        if wrote:
            damping = deploy.mode is not Mode.HOLD or verdict.writer is Writer.OWN_DAMPING
            self.writes.append(Write(write_at, "deploy", damping))
            for sup in self.supervisors:
                sup.inbox.append((write_at + self.delay_ns, "lowcmd", damping))
        elif verdict.may_write and deploy.mode is not Mode.DAMPING:  # the step outlived its lease
            deploy.mode, deploy.fault = Mode.DAMPING, "control step outlived its lease"
        deploy.lease.beat(deploy.seq, write_at)
        flags = deploy.lease.beat_flags(wrote, hears_robot=True)
        beat = Beat(0xD1, deploy.seq, deploy.mode, deploy.lease.supervisor, flags, deploy.pid, HOST)
        for sup in self.supervisors:
            sup.inbox.append((write_at + self.delay_ns, "beat", beat))
        return write_at

    def _deliver_to_supervisor(self, sup: Supervisor, now: int) -> None:
        core = sup.core
        assert core is not None
        due = [m for m in sup.inbox if m[0] <= now]
        sup.inbox = [m for m in sup.inbox if m[0] > now]
        for _at, kind, payload in due:
            if kind == "beat":
                assert isinstance(payload, Beat)
                grant = core.on_beat(payload, b"deploy", now)
                if grant is not None:
                    self._send_grant(sup, grant, now)
            elif kind == "lowcmd":
                core.on_lowcmd(b"deploy", bool(payload), now)
            elif kind == "grant":
                assert isinstance(payload, Grant)
                core.on_grant(payload, now)
            elif kind == "exit":
                core.on_exit(int(payload), now)  # type: ignore[call-overload]

    def _supervisor_step(self, sup: Supervisor, now: int) -> None:
        core = sup.core
        assert core is not None
        sup.steps += 1
        tick = core.step(now)
        if tick.grant is not None:
            self._send_grant(sup, tick.grant, now)
        write_at = now + sup.stall_before_write.get(sup.steps, 0)
        if write_at > now:
            sup.stopped.append((now + MS, write_at))  # it hears and steps nothing meanwhile
        if tick.allows_write(write_at):
            self.writes.append(Write(write_at, sup.name, True))
            core.wrote(write_at)

    def _send_grant(self, sender: Supervisor, grant: Grant, now: int) -> None:
        self.deploy.inbox.append((now + self.delay_ns, grant))
        for sup in self.supervisors:
            if sup is not sender:
                sup.inbox.append((now + self.delay_ns, "grant", grant))

    # --- what the robot got ------------------------------------------------------------------
    def max_writers_in_window(self) -> int:
        """The most distinct writers within any 20 ms (the e2e tests' own measure)."""
        return max_writers_in_window(self.writes)  # type: ignore[arg-type]

    def writers_after(self, since_ns: int) -> list[str]:
        seen: list[str] = []
        for write in self.writes:
            if write.stamp_ns >= since_ns and (not seen or seen[-1] != write.writer):
                seen.append(write.writer)
        return seen

    def longest_silence(self, since_ns: int, until_ns: int) -> int:
        stamps = [since_ns, *(w.stamp_ns for w in self.writes if since_ns <= w.stamp_ns < until_ns), until_ns]
        return max(b - a for a, b in itertools.pairwise(stamps))

    def stiff_after(self, since_ns: int) -> list[Write]:
        return [w for w in self.writes if w.stamp_ns >= since_ns and not w.damping]
