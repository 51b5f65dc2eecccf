"""Launch files checked without ROS launch (not installable here): parsed with ``ast``.

Every node is ``launch_ros.actions.Node(package='asap_ros', executable=<console script of
setup.py>)``, every config/launch file named exists, every LaunchConfiguration is declared,
every parameter given to a node is one of that node's and a typed launch argument's default is
a value the node accepts.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))
EXPECTED = {"robot.launch.py", "sim.launch.py", "record.launch.py"}


def console_scripts() -> set[str]:
    """Names of setup.py's ``console_scripts`` entry points (read with ast, not executed)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "console_scripts":
                    return {elt.value.split("=")[0].strip() for elt in value.elts}
    raise AssertionError("setup.py has no console_scripts")


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == name]


def first_string(call: ast.Call) -> str:
    assert call.args and isinstance(call.args[0], ast.Constant), ast.unparse(call)
    return call.args[0].value


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def path_parts(call: ast.Call) -> list[str]:
    """String parts of ``PathJoinSubstitution([...])``, following names bound to other joins."""
    return [elt.value for elt in call.args[0].elts if isinstance(elt, ast.Constant)]


def test_the_three_launch_files_exist():
    assert EXPECTED <= {p.name for p in LAUNCH_FILES}


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_structure(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in functions
    imported = {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "launch_ros.actions.Node" in imported


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_node_is_a_console_script_of_this_package(path):
    scripts = console_scripts()
    nodes = calls(ast.parse(path.read_text()), "Node")
    assert nodes, f"{path.name} starts no node"
    for node in nodes:
        package, executable = keyword(node, "package"), keyword(node, "executable")
        assert isinstance(package, ast.Constant) and package.value == "asap_ros", ast.unparse(node)
        assert isinstance(executable, ast.Constant), ast.unparse(node)
        assert executable.value in scripts, f"{path.name}: {executable.value} is not a console script of setup.py"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_named_file_exists(path):
    named = []
    for join in calls(ast.parse(path.read_text()), "PathJoinSubstitution"):
        for part in path_parts(join):
            if part.endswith((".yaml", ".py")):
                folder = "launch" if part.endswith(".py") else "config"
                named.append(ROOT / folder / part)
    for file in named:
        assert file.is_file(), f"{path.name} names {file.relative_to(ROOT)}, which does not exist"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_launch_configuration_is_declared(path):
    tree = ast.parse(path.read_text())
    declared = {first_string(c) for c in calls(tree, "DeclareLaunchArgument")}
    used = {first_string(c) for c in calls(tree, "LaunchConfiguration")}
    assert used <= declared, f"{path.name}: undeclared {sorted(used - declared)}"
    assert declared <= used, f"{path.name}: declared but unused {sorted(declared - used)}"


def test_included_launch_arguments_are_declared_by_the_included_file():
    for path in LAUNCH_FILES:
        tree = ast.parse(path.read_text())
        for include in calls(tree, "IncludeLaunchDescription"):
            target = next(p for j in calls(include, "PathJoinSubstitution") for p in path_parts(j) if p.endswith(".py"))
            declared = {first_string(c) for c in calls(ast.parse((ROOT / "launch" / target).read_text()),
                                                       "DeclareLaunchArgument")}
            arguments = keyword(include, "launch_arguments")
            passed = {k.value for d in ast.walk(arguments) if isinstance(d, ast.Dict) for k in d.keys} if arguments else set()
            assert passed <= declared, f"{path.name} passes {sorted(passed - declared)} to {target}"


def node_params() -> dict[str, dict]:
    """Each console script's ROS parameters, by name (the nodes' schemas, named as their scripts)."""
    from asap_ros.config.node_params import NODES

    return {script: {spec.name: spec for spec in schema.params} for script, schema in NODES.items()}


def dict_items(value: ast.expr, bound: dict[str, ast.expr]) -> list[tuple[str, ast.expr]]:
    """``(key, value)`` of a dict literal, following ``**name`` and names bound to dict literals."""
    if isinstance(value, ast.Name):
        value = bound[value.id]
    if not isinstance(value, ast.Dict):
        return []  # a params file
    items = []
    for key, item in zip(value.keys, value.values):
        items += dict_items(item, bound) if key is None else [(key.value, item)]
    return items


def bindings(tree: ast.AST) -> dict[str, ast.expr]:
    """Names assigned in the launch file (``a = ...`` and ``a, b = x, y``) and their values."""
    bound = {}
    for assign in (n for n in ast.walk(tree) if isinstance(n, ast.Assign)):
        for target in assign.targets:
            if isinstance(target, ast.Name):
                bound[target.id] = assign.value
            elif isinstance(target, ast.Tuple) and isinstance(assign.value, ast.Tuple):
                bound.update({t.id: v for t, v in zip(target.elts, assign.value.elts) if isinstance(t, ast.Name)})
    return bound


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_node_parameter_exists_and_its_launch_default_is_valid(path):
    from asap_ros.config.node_params import check_value

    tree = ast.parse(path.read_text())
    bound = bindings(tree)
    defaults = {first_string(c): keyword(c, "default_value") for c in calls(tree, "DeclareLaunchArgument")}
    params = node_params()
    for node in calls(tree, "Node"):
        script = keyword(node, "executable").value
        given = keyword(node, "parameters")
        if given is None:
            continue
        for element in given.elts:
            for name, value in dict_items(element, bound):
                assert name in params[script], f"{path.name}: {script} has no parameter {name!r}"
                if not (isinstance(value, ast.Call) and getattr(value.func, "id", None) == "ParameterValue"):
                    continue
                configuration = value.args[0]
                if isinstance(configuration, ast.Name):
                    configuration = bound[configuration.id]
                argument = first_string(configuration)
                kind = keyword(value, "value_type").id
                spec = params[script][name]
                assert kind == spec.kind, f"{path.name}: {name} is {spec.kind}, launched as {kind}"
                default = defaults[argument]
                if isinstance(default, ast.Constant):
                    check_value(spec, {"int": int, "float": float}[kind](default.value), path.name)
