# SPDX-License-Identifier: Apache-2.0

"""Every command line the README (and doc/) shows is run as written: by CI or by a test here.

The README's bash blocks are parsed, not copied: editing a command there
changes what runs here. The two main commands are lines of ``.ci/run``; the
shell-session block runs in a clean shell (no venv on PATH); the colcon lines
of the distro path run in a scratch workspace. ``rosdep`` and the ``ros2``
CLI are not installable here: their lines are checked against what they
name (launch file, arguments, topic, frame, benchmark, parameter file)
instead. The pages of doc/ may show no command that neither runs; the
README's parameter table is the node's, its Python example runs, and every
link of the README and doc/ leads somewhere.
"""

import os
from pathlib import Path
import re
import shlex
import signal
import subprocess
import time

from ik_node.bench.cli import build_parser
import pytest
from ros_helpers import client_node, unique_domain_id
from sources import copy_sources
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / 'README.md'
DOC_PAGES = sorted((ROOT / 'doc').glob('*.md'))
# The README a user reads in five minutes (issue 23: ~200 lines); the rest is in doc/.
README_MOST_LINES = 220
QUICK_START = 'Quick start'
DISTRO = 'Standard ROS 2 path'
REAL_ARM = 'Use with a real arm'
# Commands that run until stopped: started in the background, stopped by SIGINT.
LONG_RUNNING = ('ik_node',)
# Tools of a ROS 2 distro install, not installable here (see the module docstring).
DISTRO_ONLY = ('rosdep', 'ros2')
# A PATH without the project's venv: `source scripts/env.sh` must provide the rest.
BARE_PATH = os.pathsep.join(p for p in os.environ['PATH'].split(os.pathsep)
                            if not p.startswith(str(ROOT)))


def readme_commands(page=README):
    """Return (section, command) for each command line of a page's bash blocks (the README).

    Trailing comments are dropped; the section is the nearest '## ' heading (up to
    a parenthesis).
    """
    section, in_block, found = '', False, []
    for line in page.read_text(encoding='utf-8').splitlines():
        if line.startswith('```'):
            in_block = line.strip() == '```bash' if not in_block else False
            continue
        if not in_block and line.startswith('## '):
            section = line[3:].split(' (')[0].strip()
        elif in_block:
            command = re.sub(r'\s+#.*$', '', line).strip()
            if command and not command.startswith('#'):
                found.append((section, command))
    return found


def ci_lines():
    """Return the stripped lines of .ci/run, and each command before its ``--pytest-args``.

    CI runs the README's ``colcon test`` line with a selection of pytest's
    (colcon's own option, the line otherwise as written).
    """
    lines = {line.strip() for line in (ROOT / '.ci' / 'run').read_text().splitlines()}
    flag = ' --pytest-args '
    return lines | {line.split(flag)[0] for line in lines if flag in line}


def section_commands(section):
    """Commands of one README section that CI does not run."""
    ci = ci_lines()
    return [cmd for sec, cmd in readme_commands() if sec == section and cmd not in ci]


def run_bash(script, env, cwd, timeout_s):
    """Run a bash script; return the completed process (output as text)."""
    return subprocess.run(['bash', '-c', script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)


def clean_env(**extra):
    """Environment of a new shell: no venv, no ROS variables, own ROS domain."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('ROS_', 'AMENT_', 'RMW_', 'COLCON_', 'VIRTUAL_ENV', 'PYTHON'))}
    env.update(PATH=BARE_PATH, ROS_DOMAIN_ID=str(unique_domain_id()), **extra)
    return env


def test_readme_shows_the_two_main_commands_and_ci_runs_them_as_written():
    main = [cmd for sec, cmd in readme_commands() if sec == QUICK_START][:2]
    assert main == ['bash scripts/demo.sh', 'bash scripts/test.sh'], main
    assert set(main) <= ci_lines(), '.ci/run must run the README commands as written'
    # The main job first: a failing demo must fail CI before the tests run.
    text = (ROOT / '.ci' / 'run').read_text()
    assert text.index('bash scripts/demo.sh') < text.index('bash scripts/test.sh')


def test_every_readme_command_is_run_by_ci_or_by_a_test():
    ci = ci_lines()
    runners = {QUICK_START, DISTRO, REAL_ARM}
    orphans = [(sec, cmd) for sec, cmd in readme_commands()
               if cmd not in ci and sec not in runners]
    assert not orphans, f'README commands run by neither .ci/run nor test_readme.py: {orphans}'
    for page in DOC_PAGES:     # no test here runs doc/ commands: only CI's lines may appear
        orphans = [cmd for _, cmd in readme_commands(page) if cmd not in ci]
        assert not orphans, f'{page.name}: commands run by neither .ci/run nor a test: {orphans}'


@pytest.mark.integration
def test_quick_start_shell_session_runs_as_written(tmp_path):
    """The shell block, line by line in one clean bash: set-up, node, target, benchmark."""
    node_log = tmp_path / 'ik_node.log'
    lines = ['set -euo pipefail']
    for cmd in section_commands(QUICK_START):
        if cmd.split()[0] in LONG_RUNNING:
            # As in a second terminal: in the background until it has loaded the model.
            lines += [f'{cmd} > {shlex.quote(str(node_log))} 2>&1 &', 'node_pid=$!',
                      'for _ in $(seq 600); do grep -q "model:" '
                      f'{shlex.quote(str(node_log))} && break; '
                      'kill -0 $node_pid || exit 90; sleep 0.1; done']
        else:
            lines.append(cmd)
    lines += ['for c in ik_node ik_target ik_bench ik_demo ik_viewer; do command -v $c; done',
              'kill -INT $node_pid', 'wait $node_pid', 'echo "node exit $?"']
    result = run_bash('\n'.join(lines), clean_env(), ROOT, 300)
    log = node_log.read_text() if node_log.exists() else '(no node log)'
    assert result.returncode == 0, result.stdout + result.stderr + log
    assert 'node exit 0' in result.stdout
    # The console scripts come from the venv (not a stale install elsewhere).
    for name in ('ik_node', 'ik_target', 'ik_bench', 'ik_demo', 'ik_viewer'):
        assert str(ROOT / '.venv' / 'bin' / name) in result.stdout.splitlines()
    assert 'sent on /ik_node/target_pose' in result.stdout
    assert 'matrix_to_quaternion' in result.stdout  # the benchmark's table
    assert 'model: chain iiwa_link_0 -> tool0, 7 joints it controls' in log
    assert 'model: 10 of 10 links usable as target frames' in log


@pytest.mark.slow
def test_distro_path_colcon_lines_run_as_written(tmp_path):
    """Run the colcon lines in a scratch workspace holding a copy of the package."""
    ws = tmp_path / 'ws'
    copy_sources(ws / 'src' / 'ik_node')
    colcon = [cmd for sec, cmd in readme_commands()
              if sec == DISTRO and cmd.split()[0] not in DISTRO_ONLY]
    assert colcon == ['colcon build --packages-select ik_node', 'source install/setup.bash',
                      'colcon test --packages-select ik_node', 'colcon test-result --verbose']
    # .ci/run runs all four in a workspace of the checkout; here the first two
    # in a copy, and what they install is checked (colcon test would run this test).
    assert set(colcon) <= ci_lines()
    runnable = colcon[:2]
    # No `set -u`: colcon's setup.bash reads unset variables, as a user's shell allows.
    script = '\n'.join(['set -eo pipefail', f'source {ROOT}/scripts/env.sh', *runnable,
                        'python -c "from ament_index_python.packages import '
                        "get_package_share_directory as g; print(g('ik_node'))\"",
                        f'env -0 > {tmp_path / "env.bin"}'])
    env = clean_env(COLCON_HOME=str(ws / '.colcon'))
    result = run_bash(script, env, ws, 600)
    assert result.returncode == 0, result.stdout + result.stderr
    share = ws / 'install' / 'ik_node' / 'share' / 'ik_node'
    assert result.stdout.strip().splitlines()[-1] == str(share)
    executable = ws / 'install' / 'ik_node' / 'lib' / 'ik_node' / 'ik_node'
    assert os.access(executable, os.X_OK)
    installed = dict(item.split('=', 1) for item in
                     (tmp_path / 'env.bin').read_text().split('\0') if '=' in item)
    run_installed_node_to_the_readme_target(executable, share, installed)


def run_installed_node_to_the_readme_target(executable, share, env):
    """Run the ros2-free equivalent of the launch and `ros2 topic pub` lines (install space).

    Starts the installed executable (what `ros2 run` / launch_ros start) with
    the installed iiwa14 parameter file, publishes the README's target
    message and checks that the arm's tip reaches it (the tests' FK), then
    that SIGINT stops it with exit code 0.
    """
    import numpy as np
    from ik_node.core.model.chain import Chain
    from ik_node.ros.conversions import pose_msg
    from ik_node.core.rotations import quaternion_to_matrix
    from oracle import forward
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState
    pub = next(shlex.split(cmd) for sec, cmd in readme_commands()
               if sec == DISTRO and cmd.startswith('ros2 topic pub'))
    message = yaml.safe_load(pub[6])
    position = [message['pose']['position'][k] for k in 'xyz']
    quaternion = [message['pose']['orientation'][k] for k in 'xyzw']
    urdf = share / 'urdf' / 'iiwa14.urdf'
    chain = Chain.from_urdf_file(str(urdf), message['header']['frame_id'], 'tool0')
    domain = unique_domain_id()
    proc = subprocess.Popen([str(executable), '--ros-args', '--params-file',
                             str(share / 'config' / 'iiwa14.yaml'), '-p', f'urdf_path:={urdf}'],
                            env=dict(env, ROS_DOMAIN_ID=str(domain)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        with client_node(domain, 'readme_client') as (client, executor):
            joints = []
            client.create_subscription(JointState, 'joint_states', joints.append, 10)
            target_pub = client.create_publisher(PoseStamped, pub[4], 10)
            end = time.monotonic() + 120.0
            while (not joints or target_pub.get_subscription_count() == 0) and \
                    time.monotonic() < end and proc.poll() is None:
                executor.spin_once(timeout_sec=0.05)
            msg = PoseStamped(pose=pose_msg(position, quaternion))
            msg.header.frame_id = message['header']['frame_id']
            target_pub.publish(msg)

            def tip_error():
                tip = forward(chain, np.array(joints[-1].position))
                return max(np.linalg.norm(tip[:3, 3] - position) / 1e-4, np.linalg.norm(
                    tip[:3, :3] - quaternion_to_matrix(quaternion)) / 1e-3)
            end = time.monotonic() + 60.0
            while (not joints or tip_error() > 1.0) and time.monotonic() < end:
                executor.spin_once(timeout_sec=0.05)
            reached = bool(joints) and tip_error() <= 1.0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            out = proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0]
    assert reached, out
    assert proc.returncode == 0, out


def test_distro_only_lines_name_what_the_package_provides():
    """Check the rosdep / ros2 lines: the file, arguments, topic, frame, benchmark exist.

    These tools are not installable here; the launch line is run by hand with
    launch_ros (see test_launch.py) and this checks what each line names.
    """
    lines = [shlex.split(cmd) for cmd in section_commands(DISTRO)
             if cmd.split()[0] in DISTRO_ONLY]
    assert [w[:2] for w in lines] == [['rosdep', 'install'], ['ros2', 'launch'],
                                      ['ros2', 'topic'], ['ros2', 'run']]
    rosdep, launch, pub, run = lines
    assert rosdep[2:] == ['--from-paths', 'src', '--ignore-src', '-y']
    assert launch[2] == 'ik_node' and (ROOT / 'launch' / launch[3]).is_file()
    arguments = dict(a.split(':=') for a in launch[4:])
    assert (ROOT / 'config' / f"{arguments['robot']}.yaml").is_file()
    declared = re.findall(r"DeclareLaunchArgument\('(\w+)'", (ROOT / 'launch' / launch[3])
                          .read_text())
    assert set(arguments) <= set(declared)
    assert pub[2:5] == ['pub', '--once', '/ik_node/target_pose']
    assert pub[5] == 'geometry_msgs/msg/PoseStamped'
    message = yaml.safe_load(pub[6])
    assert message['header']['frame_id'] == base_links()['iiwa14']
    quaternion = [message['pose']['orientation'][k] for k in 'xyzw']
    assert abs(sum(v * v for v in quaternion) - 1.0) < 1e-12
    assert run[2:4] == ['ik_node', 'ik_bench']
    build_parser().parse_args(run[4:])


def base_links(several=False):
    """Return {robot: base_link} of the bundled configurations (config/<robot>.yaml).

    Those of one end effector (``several``: those with end_effectors).
    """
    found = {}
    for path in sorted((ROOT / 'config').glob('*.yaml')):
        for section in yaml.safe_load(path.read_text()).values():
            params = section.get('ros__parameters', {})
            if 'base_link' in params and ('end_effectors' in params) == several:
                found[path.stem] = params['base_link']
    return found


def test_the_two_arm_robot_the_readme_launches_is_bundled():
    """`robot:=<name>` of a robot with several end effectors: its URDF and config are there."""
    text = README.read_text(encoding='utf-8')
    named = set(re.findall(r'`robot:=(\w+)`: two arms', text))
    assert named and named == set(base_links(several=True)), named
    for robot in named:
        assert (ROOT / 'urdf' / f'{robot}.urdf').is_file()


def test_the_target_example_names_each_robots_base_frame_and_each_reaches_it():
    """The `ros2 topic pub` pose, in the frame the README gives per robot, is solvable by each."""
    from ik_node.core.rotations import quaternion_to_matrix
    from ik_node.core.ik.factory import make_solver
    from ik_node.description.urdf import bundled_urdf, chain_from_urdf_file
    import numpy as np
    text = README.read_text(encoding='utf-8')
    named = {robot: frame for frame, robot in
             re.findall(r'`(\w+)` \((iiwa14|panda|ur5e|xarm7)\)', text)}
    launchable = re.search(r'`robot:=` takes ([\w, ]+) or (\w+);', text)
    robots = launchable.group(1).split(', ') + [launchable.group(2)]
    assert named == base_links() and sorted(robots) == sorted(named), (named, robots)
    pub = next(shlex.split(cmd) for sec, cmd in readme_commands()
               if sec == DISTRO and cmd.startswith('ros2 topic pub'))
    pose = yaml.safe_load(pub[6])['pose']
    target = np.eye(4)
    target[:3, :3] = quaternion_to_matrix([pose['orientation'][k] for k in 'xyzw'])
    target[:3, 3] = [pose['position'][k] for k in 'xyz']
    for robot, frame in named.items():
        chain = chain_from_urdf_file(bundled_urdf(f'{robot}.urdf'), frame, 'tool0')
        solver = make_solver(chain)
        rng = np.random.default_rng(0)
        seeds = [chain.mid_limits()] + [rng.uniform(chain.lower, chain.upper) for _ in range(20)]
        reached = [solver.solve(target, q) for q in seeds]
        best = min(reached, key=lambda r: r.position_error)
        assert best.success, (robot, best.position_error)
        # An independent check of the solution: forward kinematics reaches the pose.
        np.testing.assert_allclose(chain.forward(best.q)[:3, 3], target[:3, 3], atol=1e-4)


def test_real_arm_line_names_the_node_and_the_bundled_parameter_file():
    """The ros2_control line: ``ros2 run ik_node ik_node`` with the installed parameter file.

    ``ros2`` is not installable here; test_real_arm.py runs the node with
    the same parameter file against the controller stand-in.
    """
    lines = [shlex.split(cmd) for cmd in section_commands(REAL_ARM)]
    assert len(lines) == 1, lines
    (words,) = lines
    assert words[:5] == ['ros2', 'run', 'ik_node', 'ik_node', '--ros-args']
    files = [words[k + 1] for k, w in enumerate(words) if w == '--params-file']
    assert len(files) == 2 and files[0] == 'my_arm.yaml'
    prefix = '$(ros2 pkg prefix ik_node)/share/ik_node/'
    assert files[1].startswith(prefix)
    assert (ROOT / files[1][len(prefix):]).is_file(), files[1]
    assert 'ik_node' in console_scripts()   # what ros2 run starts (lib/ik_node/ik_node)


def test_ik_bench_commands_named_in_the_readme_parse():
    """Every `ik_bench ...` the README names (figures' commands) is a valid command line."""
    named = {command for page in [README, *DOC_PAGES]
             for command in re.findall(r'`ik_bench ([^`]+)`', page.read_text(encoding='utf-8'))}
    assert len(named) >= 10, named
    parser = build_parser()
    for text in sorted(named):
        argv = shlex.split(text.replace(' N', ' 5'))
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f'README names `ik_bench {text}`, which ik_bench does not accept')


def console_scripts():
    """Names of ik_node's console scripts, as setup.py declares them (without installing)."""
    text = (ROOT / 'setup.py').read_text()
    block = text[text.index("'console_scripts': ["):]
    return re.findall(r"'(\w+) = ik_node[\w.]*:\w+'", block[:block.index(']')])


@pytest.mark.integration
def test_console_scripts_are_on_path_after_sourcing_the_env_script():
    # The README's commands source scripts/env.sh, so `ik_demo`, `ik_bench`...
    # resolve to the venv's console scripts (an editable install that put
    # them in lib/ik_node once left them off PATH). Checked in a new shell,
    # whatever environment runs the tests.
    if not (ROOT / '.venv' / 'bin' / 'python').exists():
        pytest.skip('no .venv: scripts/setup.sh (the README test command) creates it')
    names = console_scripts()
    assert sorted(names) == ['ik_bench', 'ik_demo', 'ik_node', 'ik_target', 'ik_viewer']
    script = 'source scripts/env.sh && ' + ' && '.join(f'command -v {n}' for n in names)
    result = run_bash(script, clean_env(), ROOT, 120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == [str(ROOT / '.venv' / 'bin' / n) for n in names]


def readme_parameter_rows():
    """Return the rows of the README's parameter table as lists of cells (backticks kept)."""
    rows, inside = [], False
    for line in README.read_text(encoding='utf-8').splitlines():
        if line.startswith('| parameter | default | range | set | what |'):
            inside = True
        elif inside and line.startswith('|') and not line.startswith('|---'):
            rows.append([cell.strip() for cell in line.strip('|').split(' | ')])
        elif inside and not line.startswith('|'):
            break
    return rows


def test_the_readme_parameter_table_is_what_the_node_declares():
    """Each row: the declared name, default, range and description, in declaration order."""
    from ik_node.ros.parameters import PARAMETERS
    import rclpy
    from rclpy.parameter import Parameter
    rows = readme_parameter_rows()
    assert [row[0] for row in rows] == [f'`{p.name}`' for p in PARAMETERS]
    for (name, default, bounds, when, what), p in zip(rows, PARAMETERS):
        if isinstance(p.default, Parameter.Type):
            assert default == '[]', name
        elif isinstance(p.default, bool):
            assert default == str(p.default).lower(), name
        elif isinstance(p.default, str):
            assert default == f"`'{p.default}'`", name
        else:
            assert float(default) == p.default, name
        if p.low is None:
            assert bounds == '', name
        else:
            low, high = bounds.split(' to ')
            assert (float(low), float(high)) == (p.low, p.high), name
        assert when == ('start-up' if p.fixed else 'run time'), name
        assert what == p.text, name
    # What the node declares is that table: its own list, descriptors and ranges.
    rclpy.init(domain_id=unique_domain_id())
    try:
        from ik_node.ros.parameters import declare_parameters
        node = rclpy.create_node('readme_parameters')
        declare_parameters(node)
        for p in PARAMETERS:
            d = node.describe_parameter(p.name)
            assert d.description == p.text
            ranges = list(d.floating_point_range) + list(d.integer_range)
            assert [(r.from_value, r.to_value) for r in ranges] == (
                [] if p.low is None else [(p.low, p.high)]), p.name
        node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_the_readme_python_example_runs_and_reaches_its_target():
    """The README's Python block, run as written from the checkout, prints 'True True'.

    The checkout goes first on PYTHONPATH; whatever the environment has there
    stays (a ROS install puts rclpy, urdf_parser_py and the messages there).
    """
    (block,) = re.findall(r'```python\n(.*?)```', README.read_text(encoding='utf-8'), re.S)
    out = subprocess.run([os.environ.get('PYTHON', 'python3'), '-c', block], cwd=ROOT,
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                             p for p in (str(ROOT), os.environ.get('PYTHONPATH')) if p)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ['True', 'True'], out.stdout


def anchors(page):
    """Return the GitHub anchors of a page's headings (lower case, punctuation dropped)."""
    return {re.sub(r'[^\w\- ]', '', line.lstrip('#').strip().lower()).replace(' ', '-')
            for line in page.read_text(encoding='utf-8').splitlines() if line.startswith('#')}


def test_the_readme_is_short_and_every_link_of_it_and_doc_leads_somewhere():
    text = README.read_text(encoding='utf-8')
    assert len(text.splitlines()) <= README_MOST_LINES
    linked = set()
    for page in [README, *DOC_PAGES]:
        for target in re.findall(r'\]\(([^)\s]+)\)', page.read_text(encoding='utf-8')):
            if '://' in target:
                continue
            path, _, anchor = target.partition('#')
            file = (page.parent / path).resolve() if path else page
            assert file.is_file(), f'{page.name}: link to {target}: no such file'
            if anchor:
                assert anchor in anchors(file), f'{page.name}: link to {target}: no such heading'
            if page == README:
                linked.add(file)
    assert set(DOC_PAGES) <= linked, 'every doc/ page is linked from the README'


def test_the_fast_tier_command_selects_test_unit_only(tmp_path):
    """The README's `bash scripts/test.sh --fast` collects the unit folder, and all of it."""
    assert 'bash scripts/test.sh --fast' in README.read_text(encoding='utf-8')
    # Not colcon test's PYTEST_ADDOPTS (its JUnit file, its -m selection): a
    # user's shell has none.
    env = {k: v for k, v in os.environ.items() if k != 'PYTEST_ADDOPTS'}
    result = subprocess.run(['bash', 'scripts/test.sh', '--fast', '--collect-only', '-q'],
                            cwd=ROOT, capture_output=True, text=True, timeout=600,
                            stdin=subprocess.DEVNULL,
                            env=dict(env, IK_NODE_TEST_RESULTS=str(tmp_path)))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    ids = [line for line in result.stdout.splitlines() if '::' in line]
    files = {line.split('::')[0] for line in ids}
    assert files and all(f.startswith('test/unit/') for f in files), files
    assert files == {str(p.relative_to(ROOT)) for p in (ROOT / 'test' / 'unit').glob('test_*.py')}
