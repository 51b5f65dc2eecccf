# Sourced by scripts/setup, scripts/test, scripts/lint, scripts/run-sim and scripts/check-colcon:
# which ROS 2 distribution, interpreter, virtual environment and lock file this checkout uses.
#   ASAP_ROS_DISTRO  the ROS 2 wheels: kilted (default; rclpy 9) or jazzy (rclpy 7, Python 3.12
#                    only); exported, so the tests know which distribution they run on
#   ASAP_PYTHON      the interpreter (default: Python 3.11, or 3.12 for jazzy, found by
#                    scripts/find-python; Kilted's wheels also come for 3.10 and 3.12)
#   ASAP_SYSTEM_ROS  1: run against the system's ROS 2 (/opt/ros/$ROS_DISTRO sourced first): the
#                    venv sees the system's packages and gets no ros-* wheels from PyPI
#   ASAP_VENV        the virtual environment (default .venv for Kilted on Python 3.11,
#                    .venv-py3.N for Kilted on another, .venv-jazzy for Jazzy; -system-ros appended
#                    for ASAP_SYSTEM_ROS=1)
export ASAP_ROS_DISTRO="${ASAP_ROS_DISTRO:-kilted}"
case "$ASAP_ROS_DISTRO" in
    kilted) _default_python=3.11 ;;
    jazzy) _default_python=3.12 ;;
    *) echo "asap_ros: ASAP_ROS_DISTRO=$ASAP_ROS_DISTRO: kilted or jazzy expected" >&2; exit 1 ;;
esac
ASAP_PYTHON="${ASAP_PYTHON:-$(scripts/find-python "$_default_python")}" || exit 1
command -v "$ASAP_PYTHON" >/dev/null || {
    echo "asap_ros: $ASAP_PYTHON not found; set ASAP_PYTHON to a Python 3.10, 3.11 or 3.12 interpreter" >&2
    exit 1
}
ASAP_PY_VERSION="$("$ASAP_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
ASAP_LOCK="$(scripts/lock-for "$ASAP_PY_VERSION" "$ASAP_ROS_DISTRO")" || exit 1
if [[ "${ASAP_SYSTEM_ROS:-0}" == 1 ]]; then _suffix=-system-ros; else _suffix=""; fi
if [[ "$ASAP_ROS_DISTRO" == jazzy ]]; then
    _default_venv=".venv-jazzy$_suffix"
elif [[ "$ASAP_PY_VERSION" == 3.11 && -z "$_suffix" ]]; then
    _default_venv=.venv
else
    _default_venv=".venv-py$ASAP_PY_VERSION$_suffix"
fi
ASAP_VENV="${ASAP_VENV:-$_default_venv}"
unset _suffix _default_venv _default_python
