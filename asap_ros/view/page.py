"""The web page (a viser server): the G1 in 3D, its reference as a ghost, and the status panels.

It only displays. Its controls (the replay timeline, the plot's joint) change what is shown
and nothing else: the view process holds no DDS writer and no ROS publisher or service
client of the robot's. viser's share button (a tunnel through an outside server) is off.

Every value shown is also in the page's HTML with a ``data-view`` (or ``data-joint``)
attribute, so a browser test reads what the operator sees.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asap_ros.config.robot_description import RobotDescription
from asap_ros.view.figure import RGB, RobotFigure
from asap_ros.view.meshes import load_mesh
from asap_ros.view.snapshot import NO_VALUE, Snapshot

GHOST_RGB: RGB = (0.15, 0.4, 1.0)
GHOST_OPACITY = 0.4
COOL_C = 25.0
"""Bottom of the temperature colour scale (the simulator's ambient)."""
COOL_RGB: RGB = (0.2, 0.7, 0.3)
WARM_RGB: RGB = (1.0, 0.8, 0.1)
HOT_RGB: RGB = (0.9, 0.1, 0.1)
CAMERA_POSITION = (1.9, -1.3, 1.2)
CAMERA_LOOK_AT = (0.35, 0.45, 0.6)


@dataclass(frozen=True)
class TemperatureScale:
    """Colours from the controller's thresholds: green at ``COOL_C``, yellow at the start limit
    (no motion starts above it), red at the fault limit (DAMPING above it)."""

    start_limit_c: float
    fault_limit_c: float

    def rgb(self, temperature_c: float) -> RGB:
        if temperature_c <= self.start_limit_c:
            t = np.clip((temperature_c - COOL_C) / max(self.start_limit_c - COOL_C, 1e-6), 0.0, 1.0)
            low, high = COOL_RGB, WARM_RGB
        else:
            t = np.clip((temperature_c - self.start_limit_c) / max(self.fault_limit_c - self.start_limit_c, 1e-6), 0.0, 1.0)
            low, high = WARM_RGB, HOT_RGB
        return tuple(float(a + (b - a) * t) for a, b in zip(low, high))


def css_rgb(rgb: RGB) -> str:
    return "rgb({},{},{})".format(*(round(255 * c) for c in rgb))


def _cell(key: str, value: str) -> str:
    return f'<tr><th style="text-align:left;padding-right:1em">{key}</th><td data-view="{key}">{html.escape(value)}</td></tr>'


def status_html(snapshot: Snapshot) -> str:
    phase = NO_VALUE if snapshot.phase is None else f"{snapshot.phase:.3f}"
    motion = snapshot.motion or NO_VALUE
    if snapshot.motion and snapshot.episode:
        motion += f" (episode {snapshot.episode})"
    rows = [
        ("mode", snapshot.mode), ("fault", snapshot.fault or NO_VALUE), ("motion", motion), ("phase", phase),
        ("root", snapshot.root_source), ("reference", "ghost shown" if snapshot.reference is not None else NO_VALUE),
        ("clock", snapshot.clock or NO_VALUE),
    ]  # fmt: skip
    return "<table>" + "".join(_cell(k, v) for k, v in rows) + "</table>"


def timing_html(snapshot: Snapshot) -> str:
    t = snapshot.timing
    if t is None:
        rows = [("latency", NO_VALUE), ("late steps", NO_VALUE)]
    else:
        rows = [("latency", f"p50 {t.latency_p50_ms:.2f} ms, p99 {t.latency_p99_ms:.2f} ms"),
                ("late steps", f"{t.late_steps} of the last {t.steps}")]  # fmt: skip
    return "<table>" + "".join(_cell(k, v) for k, v in rows + [("recorder", snapshot.recorder)]) + "</table>"


def temperature_html(temperature_c: np.ndarray | None, joint_names: Sequence[str], scale: TemperatureScale) -> str:
    legend = (f'<div>start limit <b data-view="start-limit">{scale.start_limit_c:g} °C</b>, '
              f'fault limit <b data-view="fault-limit">{scale.fault_limit_c:g} °C</b></div>')  # fmt: skip
    if temperature_c is None:
        return legend + '<div data-view="temperatures">no LowState yet</div>'
    cells = []
    for name, value in zip(joint_names, temperature_c):
        label = name.removesuffix("_joint")
        cells.append(f'<tr><td>{label}</td><td data-joint="{name}" style="text-align:right;padding:0 .4em;'
                     f'background:{css_rgb(scale.rgb(float(value)))}">{value:.0f} °C</td></tr>')  # fmt: skip
    return legend + '<table data-view="temperatures" style="font-size:0.8em">' + "".join(cells) + "</table>"


class ViewPage:
    """The viser server and everything on the page; :meth:`show` displays one snapshot."""

    def __init__(self, description: RobotDescription, scale: TemperatureScale, host: str, port: int,
                 title: str) -> None:  # fmt: skip
        import viser

        self.server = viser.ViserServer(host=host, port=port, label=title, verbose=False)
        self.server.gui.configure_theme(control_width="large", show_share_button=False, show_logo=False)
        self.server.initial_camera.position = CAMERA_POSITION
        self.server.initial_camera.look_at = CAMERA_LOOK_AT
        self.server.scene.add_grid("/ground", width=6.0, height=6.0, cell_size=0.25)
        meshes = [load_mesh(v.mesh, v.origin) for v in description.visuals]
        self.robot = RobotFigure(self.server.scene, "/robot", description, meshes)
        self.ghost = RobotFigure(self.server.scene, "/reference", description, meshes, GHOST_RGB, GHOST_OPACITY)
        self.ghost.visible = False
        self.robot.visible = False
        self._joint_names = description.motor_joints
        self._links = self.robot.motor_links()
        self._scale = scale
        gui = self.server.gui
        with gui.add_folder("Status"):
            self._status = gui.add_html(status_html(Snapshot(None, NO_VALUE, None)))
        with gui.add_folder("Control loop and recorder"):
            self._timing = gui.add_html(timing_html(Snapshot(None, NO_VALUE, None)))
        with gui.add_folder("Motor temperatures"):
            self._temperatures = gui.add_html(temperature_html(None, self._joint_names, scale))

    @property
    def url(self) -> str:
        return f"http://{self.server.get_host()}:{self.server.get_port()}"

    def show(self, snapshot: Snapshot) -> None:
        with self.server.atomic():
            if snapshot.robot is not None:
                self.robot.pose(snapshot.robot)
                self.robot.visible = True
            if snapshot.reference is not None:
                self.ghost.pose(snapshot.reference)
            self.ghost.visible = snapshot.reference is not None
            if snapshot.temperature_c is not None:
                self.robot.tint_links({self._links[name]: self._scale.rgb(float(value))
                                       for name, value in zip(self._joint_names, snapshot.temperature_c)})  # fmt: skip
            _set_html(self._status, status_html(snapshot))
            _set_html(self._timing, timing_html(snapshot))
            _set_html(self._temperatures, temperature_html(snapshot.temperature_c, self._joint_names, self._scale))

    def close(self) -> None:
        self.server.stop()


def _set_html(handle, content: str) -> None:
    if handle.content != content:
        handle.content = content
