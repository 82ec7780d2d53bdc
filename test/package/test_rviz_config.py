# SPDX-License-Identifier: Apache-2.0

"""The bundled RViz config shows what the node serves: its markers and its handles.

RViz resolves a relative topic or namespace in its own node's namespace,
which the launch file sets to the ik_node's: so the config names the node's
private names (``~/markers``, ``~/target_marker``) relative to the node.
Display class names are rviz_default_plugins' (plugins_description.xml).
"""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def displays():
    """Return the config's displays, class -> its dict."""
    config = yaml.safe_load((ROOT / 'rviz' / 'ik_node.rviz').read_text())
    return {d['Class']: d for d in config['Visualization Manager']['Displays']}


def test_the_config_shows_the_nodes_markers_and_its_handles():
    shown = displays()
    assert shown['rviz_default_plugins/MarkerArray']['Topic']['Value'] == 'ik_node/markers'
    handles = shown['rviz_default_plugins/InteractiveMarkers']
    assert handles['Interactive Markers Namespace'] == 'ik_node/target_marker'
    assert handles['Enabled'] is True
    # test_target_marker serves /ik_node/target_marker to an RViz-like client.
