"""``asap-ros check-policy``: summary on success, one clear line and exit 2 on a mismatch."""

from __future__ import annotations

import pytest
import yaml

from asap_ros.cli import main
from asap_ros.config.paths import policies_dir


@pytest.mark.parametrize("name", ["CR7_level1", "kick_level1", "APT_level1"])
def test_shipped_policies_pass(name, capsys):
    assert main(["check-policy", name]) == 0
    out = capsys.readouterr().out
    assert f"({name})" in out and "sha256:" in out and " ok" in out
    assert "actor_obs [1, 380] -> action [1, 23] ok" in out
    for offset, block in [(0, "actions"), (72, "history_actor"), (376, "projected_gravity"), (379, "ref_motion_phase")]:
        assert f"{offset:4d} {block}" in out
    assert "total 380 = actor input 380" in out
    assert "action on the zero observation: min" in out


def test_standing_actor_passes(capsys):
    assert main(["check-policy", "dec_loco_stand"]) == 0
    out = capsys.readouterr().out
    assert "actor_obs [1, 500] -> action [1, 12] ok" in out and "total 500 = actor input 500" in out
    assert "clip:    none (standing actor" in out


def _spec(tmp_path, edit):
    data = yaml.safe_load((policies_dir() / "CR7_level1.yaml").read_text())
    edit(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d["actor"].update(sha256="f" * 64), "bad.yaml: actor.sha256: does not match"),
        (lambda d: d["actor"]["output"].update(name="act"), "bad.yaml: actor.output.name: ONNX model model_191500.onnx has outputs ['action'] (got 'act')"),
        (lambda d: d["observation"]["terms"]["dof_vel"].update(dim=22), "bad.yaml: observation.terms: term dims sum to 375"),
    ],
)
def test_mismatch_exits_2_with_the_reason(tmp_path, capsys, edit, message):
    assert main(["check-policy", _spec(tmp_path, edit)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.startswith("asap-ros check-policy: error:")


def test_unknown_policy_name(capsys):
    assert main(["check-policy", "no_such_policy"]) == 2
    assert "no_such_policy.yaml: cannot read file" in capsys.readouterr().err
