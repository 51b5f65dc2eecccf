"""`asap-ros export` across processes: the clip pickle read back by a fresh interpreter with numpy only, and several bags exported by a process pool."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from asap_ros.cli import main
from asap_ros.config.robot import load_robot_model
from asap_ros.export.exporter import export_bag
from asap_ros.testing.synthetic_bags import SyntheticPlan, write_synthetic_session

REPO = Path(__file__).resolve().parents[2]
MOTION = "CR7_level1"


FRESH_LOADER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from asap_ros.config.clip import load_pickle_restricted
data = load_pickle_restricted(sys.argv[2])
(name, clip), = data.items()
heavy = sorted(m for m in ("joblib", "mujoco", "rosbags", "mcap", "onnxruntime", "rclpy", "torch") if m in sys.modules)
print(json.dumps({"name": name, "heavy": heavy, "fps": clip["fps"], "fps_type": type(clip["fps"]).__name__,
                  "arrays": {k: [list(v.shape), str(v.dtype)] for k, v in clip.items() if k != "fps"}}))
"""


def test_asap_clip_loads_in_fresh_python_with_numpy_only(tmp_path, assets):
    session = write_synthetic_session(tmp_path / "session", SyntheticPlan(episodes=1, episode_s=2.0, motion=MOTION),
                                      load_robot_model().default_q)
    (record,) = export_bag(session, tmp_path / "export", ["asap"], progress=False)
    (path,) = (Path(f) for f in record.files if f.endswith(".pkl"))
    result = subprocess.run([sys.executable, "-I", "-c", FRESH_LOADER, str(REPO), str(path)],
                            capture_output=True, text=True, check=True)  # fmt: skip
    info = json.loads(result.stdout)
    assert info["heavy"] == []
    assert info["name"] == path.stem
    assert info["fps"] == 50.0 and info["fps_type"] == "float"  # ASAP writes 1 / dt
    rows = 99  # 100 actor steps: each row pairs a step's action with the next step's state
    assert info["arrays"] == {
        "root_trans_offset": [[rows, 3], "float32"],
        "pose_aa": [[rows, 27, 3], "float32"],
        "dof": [[rows, 23], "float32"],
        "root_rot": [[rows, 4], "float32"],
        "actor_obs": [[rows, 380], "float32"],
        "action": [[rows, 23], "float32"],
        "terminate": [[rows], "int64"],
        "root_lin_vel": [[rows, 3], "float32"],
        "root_ang_vel": [[rows, 3], "float32"],
        "dof_vel": [[rows, 23], "float32"],
        "motion_times": [[rows], "float32"],
        "action_executed": [[rows, 23], "float32"],
        "gyro": [[rows, 3], "float32"],
    }


def test_many_bags_in_parallel(tmp_path, capsys, assets):
    robot = load_robot_model()
    bags = [
        write_synthetic_session(tmp_path / f"bag{i}", SyntheticPlan(episodes=1, episode_s=1.0), robot.default_q)
        for i in range(2)
    ]
    assert main(["export", *map(str, bags), "--out", str(tmp_path / "out"), "-j", "2"]) == 0
    assert sorted(p.name for p in (tmp_path / "out").glob("*.pkl")) == [
        "bag0_ep001_CR7_level1.pkl", "bag1_ep001_CR7_level1.pkl"
    ]  # fmt: skip
