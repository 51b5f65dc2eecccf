"""The delta-action check's acceptance figures on lock-step sessions (issue 40), printed.

Sessions: ASAP's kick, CR7 and APT actors run lock-step (``asap-ros rollout``'s simulated G1, the
project's controller and wire format; :mod:`asap_ros.testing.lockstep_session`) on the nominal,
weak_knees, torque80 and torque65 robots. Lock-step sessions are deterministic: one per profile and
motion (a second would be the same bit for bit). Replays at the recording's 500 Hz (``--physics-hz
500 --decimation 10``), runtime targets, the measured reset (gyro, stance-foot leg odometry; the
fallback where no foot is planted is the true pelvis velocity, not a mocap fit), 1 s windows every 0.5 s.

- fidelity: the full-state replay with the recording's physics, and the nominal floor per motion;
- oracle: the exact runtime oracle, per tick and every physics step: S and R against the floor
  of the nominal session of the same motion (``--floor``) and against the session replayed given
  its true defect (``--profile``);
- fit (weak_knees, torque80): ``delta fit`` on two motions, the third replayed; S, the change's
  interval, the knees' rank, the implied torque scale;
- null (nominal): the held-out change through ``auto`` and a forced ``joint`` fit;
- speed: ``openloop`` in multiples of real time on one core, ``delta fit`` of 10 000 ticks.

    .venv/bin/python benchmarks/delta_lockstep.py [--profiles nominal weak_knees torque80 torque65] [--skip-speed]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from asap_ros.config.robot import load_robot_model
from asap_ros.export.closable_gap import closable_gap
from asap_ros.export.delta_fit import fit_delta, write_model
from asap_ros.export.openloop import MEASURED, OpenLoopReplayer, OpenLoopResult, load_delta_model, run_openloop
from asap_ros.export.openloop_report import delta_ranking, implied_torque_scale, to_dict
from asap_ros.export.trainer_sim import RUNTIME_TARGETS, TrainerSim
from asap_ros.sim.profile import load_profile
from asap_ros.testing.delta_oracle import write_oracle_delta
from asap_ros.testing.lockstep_session import LockstepSession, record_lockstep, replay_exact
from asap_ros.tracking.kinematics import KeypointModel
from asap_ros.tracking.metrics import e_g_mpjpe

MOTIONS = ("CR7_level1", "kick_level1", "APT_level1")
PROFILES = ("nominal", "weak_knees", "torque80", "torque65")
FIT_PROFILES = ("weak_knees", "torque80")
PHYSICS_HZ, DECIMATION = 500.0, 10
STRIDE_S = 0.5
HORIZONS = (0.25, 0.5, 1.0)
KNEES = ("left_knee_joint", "right_knee_joint")
FIT_SPEED_TICKS = 10_000


def replayer(profile: str | None = None) -> OpenLoopReplayer:
    return OpenLoopReplayer(TrainerSim(PHYSICS_HZ, DECIMATION, targets=RUNTIME_TARGETS, profile=profile),
                            reset_velocity=MEASURED)  # fmt: skip


def fidelity(session: LockstepSession, keypoints: KeypointModel) -> float:
    """Largest E_g-mpjpe (mm) at 1.0 s of full-state replays every 0.5 s of the motion."""
    worst = 0.0
    tracked = session.tracked()
    for start in tracked[: len(tracked) - 51 : 25]:
        end = start + 51
        replay = replay_exact(session, int(start), 50)
        recorded = keypoints.keypoints(session.root_pos[start:end], session.root_quat_wxyz[start:end], session.q[start:end])
        replayed = keypoints.keypoints(replay.root_pos, replay.root_quat_wxyz, replay.q)
        worst = max(worst, 1000 * e_g_mpjpe(replayed, recorded))
    return worst


def share_lines(label: str, result: OpenLoopResult, floors: dict[str, OpenLoopResult]) -> list[str]:
    """Per motion and horizon: E_none, E_delta, and S / R against each floor."""
    lines = []
    cells = {name: closable_gap(result, floor, HORIZONS) for name, floor in floors.items()}
    for motion in sorted({w.motion for w in result.windows}):
        for h in HORIZONS:
            parts = []
            for name, by_motion in cells.items():
                c = by_motion[motion][h]
                s, sp = c.share, c.share_of(c.e_physics_rate)
                verdict = "not measurable" if not c.measurable else f"S {_f(s)}" + (f" / phys {_f(sp)}" if sp is not None else "")
                parts.append(f"{name}: E_floor {_f(c.e_floor, 1)} R {_f(c.ratio, 1)} {verdict}")
            first = next(iter(cells.values()))[motion][h]
            lines.append(f"| {label} | {motion} | {h:g} s | {first.e_none:.1f} | {_f(first.e_delta, 1)} | "
                         f"{_f(first.e_physics_rate, 1)} | " + " | ".join(parts) + " |")  # fmt: skip
    return lines


def _f(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def change_line(summary: dict) -> str:
    """The paired change of E_g-mpjpe at each horizon with its 95% interval."""
    cells = []
    for h in ("0.25", "0.5", "1"):
        c = summary["horizons"][h]["g_mpjpe_mm"]["with_change"]
        cells.append(f"{h} s {c['value']:+.1%} [{c['ci95'][0]:+.1%}, {c['ci95'][1]:+.1%}]")
    return "change of E_g-mpjpe: " + ", ".join(cells)


def attribution_line(result: OpenLoopResult) -> str:
    ranking = delta_ranking(result)
    knees = [f"{r['joint']} rank {r['rank']} ({_f(r['ratio_to_median'], 1)}× median)" for r in ranking if r["joint"] in KNEES]
    scale = implied_torque_scale(result)
    known = [v for v in scale.values() if v is not None]
    knee_scale = ", ".join(f"{k} {_f(scale[k])}" for k in KNEES)
    return (f"attribution: {'; '.join(knees)}; implied scale {knee_scale}, median joint "
            f"{_f(float(np.median(known)) if known else None)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=list(PROFILES))
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="delta_lockstep_"))
    robot, keypoints = load_robot_model(), KeypointModel()
    began = time.perf_counter()
    sessions = {(p, m): record_lockstep(m, p) for p in ["nominal", *[p for p in args.profiles if p != "nominal"]]
                for m in MOTIONS}  # fmt: skip
    print(f"# {len(sessions)} lock-step sessions recorded in {time.perf_counter() - began:.0f} s")
    for (p, m), s in sessions.items():
        print(f"  {p:<10} {m:<11} tracked {s.tracking.sum() / 50:.2f} s")

    print("\n## fidelity (full-state replay, recording's physics): worst E_g-mpjpe at 1.0 s, mm")
    for m in MOTIONS:
        print(f"  {m}: {fidelity(sessions[('nominal', m)], keypoints):.6f}")
    nominal = replayer()
    floor_results = {m: run_openloop([sessions[("nominal", m)].rows()], nominal, 1.0, STRIDE_S) for m in MOTIONS}
    print("\n## nominal floor, measured reset, 500 Hz runtime targets: E_g-mpjpe mm at 0.25 / 0.5 / 1.0 s")
    for m, result in floor_results.items():
        values = [np.mean([w.scores["without"].metrics[h]["g_mpjpe_mm"] for w in result.windows]) for h in HORIZONS]
        print(f"  {m}: " + " / ".join(f"{v:.2f}" for v in values) + f" ({len(result.windows)} windows)")
    nominal_floor = OpenLoopResult(windows=[w for r in floor_results.values() for w in r.windows])

    print("\n## oracle (exact, runtime targets): | case | motion | horizon | E_none | E_delta | E_phys | floors |")
    for profile in [p for p in args.profiles if p != "nominal"]:
        scale = load_profile(profile, robot.joint_names).torque_scale
        oracle = load_delta_model(str(write_oracle_delta(work / f"oracle_{profile}.onnx", robot, scale, runtime=True)))
        rows = [sessions[(profile, m)].rows() for m in MOTIONS]
        result = run_openloop(rows, nominal, 1.0, STRIDE_S, oracle, physics_rate=True)
        given = run_openloop(rows, replayer(profile), 1.0, STRIDE_S)
        for line in share_lines(f"oracle {profile}", result, {"nominal floor": nominal_floor, "true-defect floor": given}):
            print(line)

    print("\n## fit, held out by motion (runtime targets): | case | motion | horizon | E_none | E_delta | – | floors |")
    for profile in [p for p in args.profiles if p in (*FIT_PROFILES, "nominal")]:
        for kind in ("auto", "joint"):
            pooled: dict[float, np.ndarray] = {h: np.zeros(3) for h in HORIZONS}
            for held in MOTIONS:
                train = [sessions[(profile, m)].rows() for m in MOTIONS if m != held]
                test = [sessions[(profile, held)].rows()]
                started = time.perf_counter()
                model, report, _ = fit_delta(train, nominal, kind=kind, threads=2)
                fit_s = time.perf_counter() - started
                path = write_model(model, report, work / f"{profile}_{kind}_{held}.onnx", nominal)
                result = run_openloop(test, nominal, 1.0, STRIDE_S, load_delta_model(str(path)))
                given = run_openloop(test, replayer(profile), 1.0, STRIDE_S) if profile != "nominal" else None
                floors = {"nominal floor": nominal_floor} | ({"true-defect floor": given} if given else {})
                for h, cell in closable_gap(result, nominal_floor, HORIZONS)[held].items():
                    pooled[h] += [cell.e_none, cell.e_delta or cell.e_none, cell.e_floor or 0.0]
                label = f"fit {profile} {kind}→{report.kind}"
                for line in share_lines(label, result, floors):
                    print(line)
                summary = to_dict(result)
                print(f"|   {held} held out, {report.ticks} ticks fitted in {fit_s:.0f} s; {change_line(summary)}; "
                      f"{attribution_line(result)}")  # fmt: skip
            shares = ", ".join(f"{h:g} s " + (f"{(e[0] - e[1]) / (e[0] - e[2]):.3f}" if e[0] >= 2 * e[2] else "not measurable")
                               for h, e in pooled.items())  # fmt: skip
            print(f"|   pooled over the held-out motions (each motion's mean alike), nominal floor: S {shares}")

    if not args.skip_speed:
        rows = [sessions[("nominal", m)].rows() for m in MOTIONS]
        recorded_s = sum(len(r) / r.fps for r in rows)
        print("\n## speed")
        for hz, decimation in ((PHYSICS_HZ, DECIMATION), (200.0, 4)):
            rate = OpenLoopReplayer(TrainerSim(hz, decimation, targets=RUNTIME_TARGETS), reset_velocity=MEASURED)
            factors = []
            for _ in range(3):
                started = time.perf_counter()
                run_openloop(rows, rate, 1.0, 1.0)
                factors.append(recorded_s / (time.perf_counter() - started))
            print(f"openloop, no delta, {hz:g} Hz, one process: {recorded_s:.1f} s of recording, "
                  f"x real time median {np.median(factors):.0f} over {len(factors)} runs (target >= 30)")  # fmt: skip
        ticks = sum(len(r) - 1 for r in rows)
        repeats = int(np.ceil(FIT_SPEED_TICKS / ticks))
        started = time.perf_counter()
        _, report, _ = fit_delta(rows * repeats, nominal, threads=2)
        print(f"delta fit: {report.ticks} transitions, 2 rollout threads, 500 Hz: "
              f"{time.perf_counter() - started:.0f} s (target <= 600 s); model {report.kind}")  # fmt: skip


if __name__ == "__main__":
    main()
