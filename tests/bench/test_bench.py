"""``asap-ros bench tick`` runs the real control path and prints its figures (no speed assertions)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from asap_ros.bench.tick import STAGES, TimedActor, motion_lowstates, policy_spec_path
from asap_ros.cli import main as cli_main
from asap_ros.config.clip import load_clip
from asap_ros.config.policy_spec import load_policy_spec
from asap_ros.config.robot import load_robot_model
from asap_ros.core.policy import PolicyRunner
from asap_ros.g1.codec import decode_lowstate_cdr
from asap_ros.runtime.actor import OnnxActor

FIGURES = r"\s+(\d+\.\d)\s+(\d+\.\d)\s+(\d+\.\d)%$"


def test_bench_tick_prints_p50_p99_and_shares(assets, capsys) -> None:
    # 250 steps: longer than one CR7 motion (196 steps), so the runner is reset once
    assert cli_main(["bench", "tick", "--steps", "250", "--warmup", "10"]) == 0
    out = capsys.readouterr().out

    assert out.startswith("bench tick: CR7_level1, 250 steps after 10 warm-up, back to back")
    shares = []
    for name in (*STAGES, "total step"):
        match = re.search(rf"^{re.escape(name)}{FIGURES}", out, re.M)
        assert match, f"no figures for {name!r} in:\n{out}"
        p50, p99, share = map(float, match.groups())
        assert 0 < p50 <= p99
        shares.append(share)
    assert sum(shares[:-1]) == pytest.approx(100.0, abs=0.5) and shares[-1] == 100.0
    assert re.search(r"^target p99 < 150 us: (met|NOT met) \(p99 \d+\.\d us\)$", out, re.M)
    assert "CRC: 260/260 LowState_ valid, last LowCmd_ valid" in out


def test_bench_tick_paced_at_the_control_period_takes_that_long(assets, capsys) -> None:
    start = time.monotonic()
    assert cli_main(["bench", "tick", "--steps", "40", "--warmup", "5", "--period-ms", "20"]) == 0
    elapsed = time.monotonic() - start
    out = capsys.readouterr().out
    assert out.startswith("bench tick: CR7_level1, 40 steps after 5 warm-up, one every 20 ms")
    assert elapsed >= 45 * 0.020  # absolute deadlines: never faster than the period
    assert "CRC: 45/45 LowState_ valid, last LowCmd_ valid" in out


def test_bench_samples_replay_the_clip_with_valid_crc(assets) -> None:
    robot = load_robot_model()
    spec = load_policy_spec(policy_spec_path("CR7_level1"), robot)
    runner = PolicyRunner(spec, robot, TimedActor(OnnxActor(spec.actor_path, spec)))
    clip = load_clip(spec.clip_path)

    samples = motion_lowstates(runner)

    assert len(samples) == 196  # ticks k with phase ((k + 1) * 0.02) / 3.933 s below 1
    frame = int(100 * spec.control_dt * clip.fps)
    state = decode_lowstate_cdr(samples[100], 0)
    assert state.crc_ok and state.mode_machine == 5
    assert np.allclose(state.q[spec.driven_indices], clip.dof[frame], atol=0.02)
    assert np.isclose(np.linalg.norm(state.quat_wxyz), 1.0, atol=1e-5)
    assert len({tuple(decode_lowstate_cdr(m, 0).q.round(3)) for m in samples}) == len(samples)


def test_bench_tick_rejects_bad_step_counts(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli_main(["bench", "tick", "--steps", "0"])
    assert exit_.value.code == 2
    assert "--steps: must be >= 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["bench", "tick", "--period-ms", "-5"])
    assert "--period-ms: must be 0..1000 ms, got -5" in capsys.readouterr().err
