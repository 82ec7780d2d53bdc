# Source this file (bash) to use the project's virtual environment and ROS 2
# settings in a shell: `source scripts/env.sh`. scripts/setup.sh creates the
# environment first.
IK_NODE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export IK_NODE_ROOT
# shellcheck disable=SC1091
source "$IK_NODE_ROOT/.venv/bin/activate"
# Message packages are found through the ament index inside the venv.
export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export RMW_IMPLEMENTATION=rmw_fastrtps_cpp
# Keep DDS on loopback (Kilted ignores ROS_LOCALHOST_ONLY).
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# Logs stay inside the checkout, not in the home directory.
export ROS_HOME="$IK_NODE_ROOT/.ros"
export ROS_LOG_DIR="$ROS_HOME/log"
mkdir -p "$ROS_LOG_DIR"
