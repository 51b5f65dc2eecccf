# Sourced by scripts/setup, scripts/test and scripts/run-sim: which interpreter, virtual
# environment and lock file this checkout uses.
#   ASAP_PYTHON      the interpreter (default python3.11; 3.10 and 3.12 are supported too)
#   ASAP_SYSTEM_ROS  1: run against the system's ROS 2 (/opt/ros/$ROS_DISTRO sourced first): the
#                    venv sees the system's packages and gets no ros-* wheels from PyPI
#   ASAP_VENV        the virtual environment (default .venv for Python 3.11, .venv-py3.N for
#                    another, with -system-ros appended for ASAP_SYSTEM_ROS=1)
ASAP_PYTHON="${ASAP_PYTHON:-python3.11}"
command -v "$ASAP_PYTHON" >/dev/null || {
    echo "asap_ros: $ASAP_PYTHON not found; set ASAP_PYTHON to a Python 3.10, 3.11 or 3.12 interpreter" >&2
    exit 1
}
ASAP_PY_VERSION="$("$ASAP_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
ASAP_LOCK="$(scripts/lock-for "$ASAP_PY_VERSION")" || exit 1
if [[ "${ASAP_SYSTEM_ROS:-0}" == 1 ]]; then _suffix=-system-ros; else _suffix=""; fi
if [[ "$ASAP_PY_VERSION" == 3.11 && -z "$_suffix" ]]; then _default_venv=.venv; else _default_venv=".venv-py$ASAP_PY_VERSION$_suffix"; fi
ASAP_VENV="${ASAP_VENV:-$_default_venv}"
unset _suffix _default_venv
