"""Offscreen MuJoCo rendering of a finished run's ground-truth trajectory into an MP4 file.

Rendering happens after the run, from the per-control-step ground truth, so it never slows
the real-time simulation. It needs an OpenGL context without a display: EGL by default, or OSMesa with
``MUJOCO_GL=osmesa``. MuJoCo reads ``MUJOCO_GL`` once, when it is first imported, so
:func:`select_gl_backend` must run before that. Where no context can be made,
:func:`render_video` raises :class:`VideoError` saying so; nothing is faked.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from asap_ros.core.errors import AsapError

GL_BACKENDS = ("egl", "osmesa")
DEFAULT_GL = "egl"
WIDTH, HEIGHT = 480, 360


class VideoError(AsapError):
    """No offscreen OpenGL here, or the video could not be written."""


def render_video(
    model_path: str | Path, qpos: np.ndarray, path: str | Path, step_dt: float, fps: float = 50.0 / 3.0
) -> Path:
    """Render ``qpos`` (S, nq) sampled every ``step_dt`` seconds to an H.264 MP4 at ``fps``."""
    renderer, mujoco, model, data = _offscreen(model_path)
    import av

    every = max(1, round(1.0 / (fps * step_dt)))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    camera = mujoco.MjvCamera()  # free camera looking at the pelvis (qpos[:3]) every frame
    camera.distance, camera.azimuth, camera.elevation = 3.0, 135.0, -15.0
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=round(1.0 / (every * step_dt)))
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for frame_qpos in qpos[::every]:
            data.qpos[:] = frame_qpos
            mujoco.mj_kinematics(model, data)
            camera.lookat[:] = frame_qpos[:3]
            renderer.update_scene(data, camera)
            for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
                renderer.scene.flags[flag] = False  # software GL: 4x faster without them
            frame = av.VideoFrame.from_ndarray(renderer.render(), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    renderer.close()
    return path


def select_gl_backend() -> str:
    """Choose the offscreen GL backend (``MUJOCO_GL``, default EGL); call before mujoco is imported."""
    return os.environ.setdefault("MUJOCO_GL", DEFAULT_GL)


def _offscreen(model_path: str | Path):
    """A MuJoCo offscreen renderer on the selected GL backend."""
    import mujoco

    backend = os.environ.get("MUJOCO_GL", "<unset>")
    model = mujoco.MjModel.from_xml_path(str(model_path))
    try:
        renderer = mujoco.Renderer(model, HEIGHT, WIDTH)
    except Exception as exc:  # backends fail differently (RuntimeError, AttributeError, ImportError)
        others = ", ".join(b for b in GL_BACKENDS if b != backend)
        raise VideoError(
            f"no offscreen OpenGL for the video with MUJOCO_GL={backend} ({type(exc).__name__}: {exc}); "
            f"try MUJOCO_GL={others}"
        ) from exc
    return renderer, mujoco, model, mujoco.MjData(model)
