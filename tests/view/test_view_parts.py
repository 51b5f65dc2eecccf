"""The view's parts that need no browser: mesh simplification, the temperature scale, the panels'
HTML, the timing window, the ghost's alignment, the replay's moments of a recorded session."""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.view.meshes import cluster_vertices, load_mesh
from asap_ros.view.page import TemperatureScale, status_html, temperature_html, timing_html
from asap_ros.view.reference import ReferencePoser
from asap_ros.view.snapshot import BodyPose, Snapshot, TimingWindow

SCALE = TemperatureScale(start_limit_c=65.0, fault_limit_c=85.0)


def test_vertex_clustering_merges_close_vertices_and_drops_collapsed_faces():
    vertices = np.array([[0, 0, 0], [0.001, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=np.float64)
    faces = np.array([[0, 2, 3], [0, 1, 2], [1, 2, 3]])
    mesh = cluster_vertices(vertices, faces, cell_m=0.01)
    assert len(mesh.vertices) == 3
    assert len(mesh.faces) == 1, "the sliver face collapses, the two coinciding ones become one"
    assert mesh.vertices[mesh.faces[0]] == pytest.approx(np.array([[0.0005, 0, 0], [1, 0, 0], [0, 1, 0]]))


def test_g1_meshes_shrink_and_stay_in_place(assets):
    from asap_ros.config.robot_description import load_robot_description

    visual = next(v for v in load_robot_description().visuals if v.link == "pelvis")
    import trimesh

    full = trimesh.load_mesh(visual.mesh, file_type="stl")
    mesh = load_mesh(visual.mesh, visual.origin)
    assert len(mesh.faces) < 0.6 * len(full.faces)
    assert mesh.vertices.min(axis=0) == pytest.approx(full.vertices.min(axis=0), abs=0.006)
    assert mesh.vertices.max(axis=0) == pytest.approx(full.vertices.max(axis=0), abs=0.006)


def test_temperature_colours_follow_the_controller_thresholds():
    green, yellow, red = SCALE.rgb(25.0), SCALE.rgb(65.0), SCALE.rgb(85.0)
    assert green[1] > green[0] and yellow[0] > 0.9 and yellow[1] > 0.7 and red[0] > 0.8 and red[1] < 0.2
    assert SCALE.rgb(200.0) == red and SCALE.rgb(-10.0) == green
    assert SCALE.rgb(75.0)[1] < yellow[1], "hotter than the start limit turns red"


def test_panels_show_the_values_and_escape_text_from_the_network():
    snapshot = Snapshot(None, "mocap", None, mode="DAMPING", fault="<script>alert(1)</script> tilt 80 deg",
                        motion="kick_level1", episode=3, phase=0.5)  # fmt: skip
    html = status_html(snapshot)
    assert '<td data-view="mode">DAMPING</td>' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert '<td data-view="motion">kick_level1 (episode 3)</td>' in html and ">0.500<" in html
    temperatures = temperature_html(np.array([30.0, 70.0]), ["left_knee_joint", "right_knee_joint"], SCALE)
    assert 'data-joint="right_knee_joint"' in temperatures and ">70 °C<" in temperatures
    assert "65 °C" in temperatures and "85 °C" in temperatures
    assert "no LowState yet" in temperature_html(None, ["left_knee_joint"], SCALE)


def test_timing_window_keeps_the_newest_steps():
    window = TimingWindow(capacity=100)
    assert window.summary() is None
    for i in range(300):
        window.add(latency_ns=(i + 1) * 1000, late=i % 10 == 0)
    window.add(latency_ns=0, late=True)  # a step without a state: no latency, not counted
    t = window.summary()
    assert t.steps == 100 and t.late_steps == 10
    assert t.latency_p50_ms == pytest.approx(0.2505, abs=1e-4) and t.latency_p99_ms == pytest.approx(0.299, abs=1e-3)
    assert "p50 0.25 ms" in timing_html(Snapshot(None, "", None, timing=t))


def test_the_ghost_starts_where_the_robot_started(assets):
    from asap_ros.config.paths import policies_dir
    from asap_ros.view.reference import clips_of_policies

    poser = ReferencePoser(clips_of_policies([policies_dir() / "kick_level1.yaml"]))
    assert poser.pose(1, "moonwalk", 0.5) is None
    robot = BodyPose(np.array([2.0, -1.0, 0.75]), np.array([np.cos(0.5), 0.0, 0.0, np.sin(0.5)]), np.zeros(29))
    poser.align(1, "kick_level1", robot)
    start, later = poser.pose(1, "kick_level1", 0.0), poser.pose(1, "kick_level1", 0.6)
    assert start.pelvis_pos[:2] == pytest.approx([2.0, -1.0])
    assert not np.allclose(start.q, later.q)
    assert start.q[19:22].tolist() == [0.0, 0.0, 0.0], "the wrists are not in ASAP's clips"
    raw = poser.clip_pose("kick_level1", 0.6)
    assert later.q == pytest.approx(raw.q), "alignment moves the root only"


def test_view_of_a_folder_that_is_no_bag_names_it(tmp_path, capsys, assets):
    from asap_ros.cli import main

    assert main(["view", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "metadata.yaml" in err


@pytest.mark.parametrize("option,value", [("--rate-hz", "0"), ("--nice", "25")])
def test_view_refuses_bad_options_naming_them(option, value, capsys):
    from asap_ros.cli import main

    assert main(["view", option, value]) == 2
    assert f"{option}: must be" in capsys.readouterr().err

