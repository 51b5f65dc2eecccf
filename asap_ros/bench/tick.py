"""Time of one full control step of a motion-tracking actor, stage by stage.

One step as the control loop runs it: decode a raw ``rt/lowstate`` sample (XCDR1 bytes) ->
:class:`RobotState` with its CRC check, :meth:`PolicyRunner.step` (observation, ONNX Runtime
inference, clip and joint targets), then :class:`JointCommand` -> raw ``LowCmd_`` sample with
its CRC. The samples are serialised by the SDK from states that replay the policy's own clip
(joint angles and velocities, root orientation and body rates) with sensor noise, one per
control step; the runner is reset whenever a motion ends, as for a new run.

Steps run back to back by default (the step's own cost, caches warm). With a period, each
step starts on an absolute deadline and the thread sleeps in between, as in the control loop:
what one step costs when the caches have gone cold since the last one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.config.clip import load_clip
from asap_ros.config.paths import policies_dir
from asap_ros.config.policy_spec import load_policy_spec
from asap_ros.config.robot import load_robot_model
from asap_ros.core.policy import PolicyRunner
from asap_ros.core.quaternion import body_rates, xyzw_to_wxyz
from asap_ros.core.state import NUM_MOTORS, JointCommand
from asap_ros.g1.codec import LowCmdEncoder, decode_lowstate_cdr
from asap_ros.g1.sdk import lowcmd_crc_ok
from asap_ros.runtime.actor import OnnxActor

TARGET_P99_US = 150.0
STAGES = ("decode LowState_", "observation + targets", "inference (ONNX Runtime)", "encode LowCmd_ + CRC")
"""Stages of one step; LowState_/LowCmd_ are raw XCDR1 samples, as in the control loop."""
MODE_MACHINE = 5
"""What a G1 reports in ``LowState_.mode_machine`` (5 or 6)."""


class TimedActor:
    """The real actor, remembering how long its last call took (ns)."""

    def __init__(self, actor: OnnxActor):
        self.actor = actor
        self.last_ns = 0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        start = time.perf_counter_ns()
        action = self.actor(obs)
        self.last_ns = time.perf_counter_ns() - start
        return action


def motion_lowstates(runner: PolicyRunner, seed: int = 0) -> list[bytes]:
    """One raw ``LowState_`` sample (XCDR1, valid CRC, serialised by the SDK) per control step
    of the runner's motion."""
    from unitree_sdk2py.idl.default import unitree_hg_msg_dds__LowState_
    from unitree_sdk2py.utils.crc import CRC

    spec, rng = runner.spec, np.random.default_rng(seed)
    steps = next(k for k in range(1, 1_000_000) if runner.phase_at(k) >= 1.0)
    clip = load_clip(spec.clip_path)
    frames = np.minimum((np.arange(steps) * spec.control_dt * clip.fps).astype(int), clip.num_frames - 1)
    q = np.tile(runner.start_pose, (steps, 1))
    q[:, spec.driven_indices] = clip.dof[frames]
    dq = np.zeros_like(q)
    dq[:, spec.driven_indices] = np.gradient(clip.dof, axis=0)[frames] * clip.fps
    quat = xyzw_to_wxyz(clip.root_quat_xyzw[frames])
    rates = body_rates(xyzw_to_wxyz(clip.root_quat_xyzw), clip.fps)
    gyro = np.vstack([rates, rates[-1:]])[frames]  # the last frame keeps the last rate
    crc = CRC()
    samples = []
    for k in range(steps):
        msg = unitree_hg_msg_dds__LowState_()
        msg.tick, msg.mode_machine = k, MODE_MACHINE
        imu = msg.imu_state
        imu.quaternion = quat[k].tolist()
        imu.gyroscope = (gyro[k] + rng.normal(0.0, 0.02, 3)).tolist()
        imu.accelerometer = (np.array([0.0, 0.0, 9.81]) + rng.normal(0.0, 0.1, 3)).tolist()
        for i, motor in enumerate(msg.motor_state[:NUM_MOTORS]):
            motor.q = float(q[k, i] + rng.normal(0.0, 0.002))
            motor.dq = float(dq[k, i] + rng.normal(0.0, 0.05))
            motor.tau_est = float(rng.normal(0.0, 3.0))
            motor.temperature = [int(rng.integers(35, 45)), int(rng.integers(35, 45))]
        msg.crc = crc.Crc(msg)
        samples.append(msg.serialize())
    return samples


@dataclass
class TickBenchResult:
    """Per-step durations (ns) of each stage over the measured steps."""

    policy: str
    warmup: int
    stage_ns: dict[str, np.ndarray]
    total_ns: np.ndarray
    states_crc_ok: int
    last_lowcmd_crc_ok: bool
    period_s: float = 0.0

    @property
    def steps(self) -> int:
        return int(self.total_ns.size)

    def p99_us(self) -> float:
        return float(np.percentile(self.total_ns, 99)) / 1e3

    def report(self) -> str:
        """The figures as a small table."""
        import onnxruntime

        mean_total = float(self.total_ns.mean())
        pacing = f"one every {self.period_s * 1e3:g} ms" if self.period_s else "back to back"
        lines = [
            f"bench tick: {self.policy}, {self.steps} steps after {self.warmup} warm-up, {pacing} "
            f"(ONNX Runtime {onnxruntime.__version__}, 1 thread)",
            f"{'stage':<26}{'p50 us':>9}{'p99 us':>9}{'share':>9}",
        ]
        for name, durations in [*self.stage_ns.items(), ("total step", self.total_ns)]:
            p50, p99 = np.percentile(durations, [50, 99]) / 1e3
            share = 100.0 * float(durations.mean()) / mean_total
            lines.append(f"{name:<26}{p50:>9.1f}{p99:>9.1f}{share:>8.1f}%")
        verdict = "met" if self.p99_us() < TARGET_P99_US else "NOT met"
        lines.append(f"target p99 < {TARGET_P99_US:.0f} us: {verdict} (p99 {self.p99_us():.1f} us)")
        lines.append(
            f"CRC: {self.states_crc_ok}/{self.steps + self.warmup} LowState_ valid, "
            f"last LowCmd_ {'valid' if self.last_lowcmd_crc_ok else 'INVALID'}"
        )
        return "\n".join(lines)


class StepReplay:
    """One control step per call on replayed raw samples, as the control loop runs it: decode
    ``LowState_`` -> :meth:`PolicyRunner.step` -> encode ``LowCmd_``; the runner is reset whenever
    its motion ends, as for a new run."""

    def __init__(self, runner: PolicyRunner, actor: TimedActor, samples: list[bytes]) -> None:
        self.runner, self.actor, self.samples = runner, actor, samples
        self.encoder = LowCmdEncoder()
        self.command = JointCommand(kp=runner.kp.copy(), kd=runner.kd.copy())
        self.lowcmd: bytes | None = None
        runner.reset()

    @classmethod
    def load(cls, policy: str, seed: int = 0) -> StepReplay:
        """The policy (a spec name in ``policies/`` or a spec file) with its real actor and clip."""
        robot = load_robot_model()
        spec = load_policy_spec(policy_spec_path(policy), robot)
        actor = TimedActor(OnnxActor(spec.actor_path, spec))
        runner = PolicyRunner(spec, robot, actor)
        return cls(runner, actor, motion_lowstates(runner, seed))

    def __call__(self) -> tuple[tuple[int, int, int, int], bool]:
        """One step: the duration of each of :data:`STAGES` (ns) and whether the state's CRC held."""
        clock, runner = time.perf_counter_ns, self.runner
        sample = self.samples[runner.tick]
        t0 = clock()
        state = decode_lowstate_cdr(sample, time.time_ns(), time.monotonic_ns())
        t1 = clock()
        out = runner.step(state)
        t2 = clock()
        self.command.q = out.q_target
        self.lowcmd = self.encoder.encode_cdr(self.command, state.mode_machine)
        t3 = clock()
        if out.done:
            runner.reset()
        return (t1 - t0, t2 - t1 - self.actor.last_ns, self.actor.last_ns, t3 - t2), state.crc_ok


def run_tick_bench(replay: StepReplay, steps: int, warmup: int, period_s: float = 0.0) -> TickBenchResult:
    """Run ``warmup + steps`` control steps of ``replay``, one per ``period_s`` on absolute
    deadlines (0: back to back)."""
    from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_

    clock = time.perf_counter_ns
    count = warmup + steps
    durations = np.zeros((count, len(STAGES)), dtype=np.int64)
    crc_ok = 0
    period_ns = int(period_s * 1e9)
    deadline = clock()
    for k in range(count):
        if period_ns:
            deadline += period_ns
            time.sleep(max(0.0, (deadline - clock()) / 1e9))
        durations[k], ok = replay()
        crc_ok += ok
    measured = durations[warmup:]
    lowcmd = replay.lowcmd
    return TickBenchResult(
        policy=replay.runner.spec.name,
        warmup=warmup,
        stage_ns={name: measured[:, i] for i, name in enumerate(STAGES)},
        total_ns=measured.sum(axis=1),
        states_crc_ok=crc_ok,
        last_lowcmd_crc_ok=lowcmd is not None and lowcmd_crc_ok(LowCmd_.deserialize(lowcmd)),
        period_s=period_s,
    )


def policy_spec_path(policy: str) -> Path:
    """A spec file path as given, or the name of a spec in the package's ``policies/``."""
    path = Path(policy)
    return path if path.suffix in (".yaml", ".yml") else policies_dir() / f"{policy}.yaml"


def bench_tick(
    policy: str = "CR7_level1", steps: int = 5000, warmup: int = 200, seed: int = 0, period_s: float = 0.0
) -> TickBenchResult:
    """Load the policy (real actor, real clip) and time ``steps`` control steps."""
    return run_tick_bench(StepReplay.load(policy, seed), steps, warmup, period_s)
