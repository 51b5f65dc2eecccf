"""The robot's link meshes for the browser: STL files read with trimesh, then simplified by
vertex clustering (every vertex snapped to the centre of its cell in a regular grid, faces
that collapse dropped), so the page gets a few MB instead of the 19 MB of ASAP's meshes and a
software-rendered browser keeps up."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.core.errors import AssetError

DEFAULT_CELL_M = 0.007


@dataclass(frozen=True)
class Mesh:
    vertices: np.ndarray
    """(V, 3) float32, metres."""
    faces: np.ndarray
    """(F, 3) uint32 vertex indices."""


def cluster_vertices(vertices: np.ndarray, faces: np.ndarray, cell_m: float) -> Mesh:
    """Merge the vertices in each ``cell_m`` grid cell into their mean; drop faces that lose a corner."""
    cells = np.floor(np.asarray(vertices, dtype=np.float64) / cell_m).astype(np.int64)
    _, first, inverse = np.unique(cells, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    counts = np.bincount(inverse, minlength=len(first)).astype(np.float64)
    merged = np.stack([np.bincount(inverse, weights=vertices[:, k], minlength=len(first)) for k in range(3)], axis=1)
    merged /= counts[:, None]
    new_faces = inverse[np.asarray(faces)]
    keep = (new_faces[:, 0] != new_faces[:, 1]) & (new_faces[:, 1] != new_faces[:, 2]) & (new_faces[:, 0] != new_faces[:, 2])
    unique_faces = np.unique(np.sort(new_faces[keep], axis=1), axis=0, return_index=True)[1]
    return Mesh(merged.astype(np.float32), new_faces[keep][np.sort(unique_faces)].astype(np.uint32))


def load_mesh(path: Path, transform: np.ndarray, cell_m: float = DEFAULT_CELL_M) -> Mesh:
    """One STL file in its link's frame (``transform``: link -> mesh), simplified."""
    import trimesh

    try:
        mesh = trimesh.load_mesh(path, file_type="stl")
    except (OSError, ValueError) as exc:
        raise AssetError(f"mesh {path} unreadable: {exc}") from exc
    vertices = mesh.vertices @ transform[:3, :3].T + transform[:3, 3]
    return cluster_vertices(vertices, mesh.faces, cell_m)
