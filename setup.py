"""ament_python package: installs the code, config/, policies/ and launch/ into share/asap_ros."""

import xml.etree.ElementTree as ET
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "asap_ros"
HERE = Path(__file__).resolve().parent
SHARE = f"share/{PACKAGE}"


def share_files(folder: str, pattern: str) -> list[tuple[str, list[str]]]:
    """``data_files`` entries putting ``folder/pattern`` under ``share/asap_ros/folder``,
    keeping sub-folders; hidden files (``.keep``) are skipped."""
    by_dir: dict[str, list[str]] = {}
    for path in sorted((HERE / folder).glob(pattern)):
        relative = path.relative_to(HERE)
        if path.is_file() and not any(part.startswith(".") for part in relative.parts):
            by_dir.setdefault(f"{SHARE}/{relative.parent.as_posix()}", []).append(relative.as_posix())
    return sorted(by_dir.items())


setup(
    name=PACKAGE,
    version=ET.parse(HERE / "package.xml").findtext("version"),
    description="Robot-side runtime for ASAP motion-tracking actors on the Unitree G1",
    license="MIT",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    python_requires=">=3.10",
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (SHARE, ["package.xml"]),
        *share_files("launch", "*.py"),
        *share_files("config", "**/*"),
        *share_files("policies", "*.yaml"),
    ],
    zip_safe=False,
    entry_points={
        "console_scripts": [
            "asap-ros = asap_ros.cli:main",
            "asap_deploy = asap_ros.ros.deploy_node:main",
            "asap_mocap = asap_ros.ros.mocap_node:main",
            "asap_recorder = asap_ros.ros.recorder_node:main",
            "asap_sim = asap_ros.sim.main:main",
            "asap_supervisor = asap_ros.ros.supervisor_node:main",
        ],
    },
)
