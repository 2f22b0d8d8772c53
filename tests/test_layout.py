"""The package's layout rules (docs/design.md §7), checked on the source:

- no two modules import each other, and there is no longer import cycle;
- at most 8 modules sit directly under `edge_plm/`; the rest live in a package (a "room") by job;
- the model packages are pure computation: `plm` (shared core) and `switch` (the device's model)
  import nothing from the application (store, device, voice, cli, ...) but the error root
  (`edge_plm.errors`) and, for the checkpoint file, the atomic write (`edge_plm.files`), and
  `plm` does not import either model;
- nothing the device runs imports the desktop research code (`research`: the language model
  `lm`, the character network `charnet`) or its extra dependencies;
- every SQL statement lives in the store package (`edge_plm/store/`);
- no function outside the Numba kernels (`research/kernels.py`, and `@njit` kernels elsewhere: one
  fused loop each, next to its NumPy twin) is longer than 60 lines;
- no class is longer than 300 lines (one known exception, capped at its size until it is split).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "edge_plm"
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 300
#: classes still over MAX_CLASS_LINES, with the size they may not exceed (to be split)
LONG_CLASSES = {"edge_plm/research/charnet/network.py SwitchNet": 428}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The edge_plm modules `name` imports (at module level or inside functions)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in MODULES:
                    found.add(full)
                elif source in MODULES:
                    found.add(source)
    found.discard(name)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    return out


def _reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in GRAPH[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


MAX_LOOSE_MODULES = 8


def test_few_modules_sit_directly_under_the_package():
    """A new module goes into the room of its job (config, voice, decide, learning, loop, ...)."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_no_import_cycles():
    assert _cycles() == []


def _in(package: str, name: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("package, allowed", [
    ("edge_plm.plm", {"edge_plm.plm", "edge_plm.actions", "edge_plm.errors", "edge_plm.files"}),
    ("edge_plm.switch", {"edge_plm.plm", "edge_plm.switch", "edge_plm.actions", "edge_plm.errors"}),
])
def test_model_packages_are_pure_computation(package, allowed):
    outside = {f"{m} -> {w}" for m in MODULES if _in(package, m)
               for w in GRAPH[m] if not any(_in(a, w) for a in allowed) and w != "edge_plm"}
    assert outside == set()


@pytest.mark.parametrize("entry", ["edge_plm.loop.controller", "edge_plm.learning.learner", "edge_plm.loop.replay"])
def test_the_loop_does_not_import_the_language_model(entry):
    assert {m for m in _reachable(entry) if _in("edge_plm.research", m)} == set()


def test_starting_the_cli_loads_no_language_model():
    """`edge-plm run` on a Pi loads the CLI: of the language model it reads only the names of its
    configurations (`research/lm/config.py`, plain dataclasses, for `train lm --model-config`); the model,
    its kernels, trainer and optional `tokenizers` are imported only by `train lm`."""
    code = ("import sys, edge_plm.cli, edge_plm.loop.controller, edge_plm.loop.replay; "
            "print(sorted(m for m in sys.modules if m.startswith(('edge_plm.research', 'tokenizers'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(["edge_plm.research", "edge_plm.research.lm", "edge_plm.research.lm.config"])


def _calls_sql(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"execute", "executemany", "executescript", "query"})


def _reaches_into_store(node: ast.AST) -> bool:
    """`store.db` or `self.store.db`: the store's sqlite-utils Database used from outside."""
    if not (isinstance(node, ast.Attribute) and node.attr == "db"):
        return False
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id == "store") or (isinstance(owner, ast.Attribute) and owner.attr == "store")


def test_sql_lives_in_the_store():
    offenders = []
    for name, path in MODULES.items():
        if _in("edge_plm.store", name):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if _calls_sql(node) or _reaches_into_store(node):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert offenders == []


def test_functions_are_short():
    long = []
    for name, path in MODULES.items():
        if name.startswith("edge_plm.research.kernels"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any("njit" in ast.unparse(d) for d in node.decorator_list):
                    continue  # a fused Numba loop, checked against its NumPy twin
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_docs_give_the_parameter_counts_eval_prints():
    """docs/deploy.md names each configuration's parameter count as `edge-plm eval` prints it."""
    from edge_plm.switch.config import CONFIGS

    deploy = (Path(__file__).resolve().parents[1] / "docs" / "deploy.md").read_text()
    text = " ".join(deploy.split())
    for cfg in CONFIGS.values():
        n = cfg.param_count()
        assert f"{n:,} parameters" in text or f"{n:,}:" in text, cfg.name


def _class_sizes() -> dict[str, int]:
    """"<path> <class>" -> lines, for every class in the package."""
    return {f"{path.relative_to(PACKAGE.parent)} {node.name}": node.end_lineno - node.lineno + 1
            for path in MODULES.values() for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ClassDef)}


def test_classes_are_short():
    sizes = _class_sizes()
    assert {name: n for name, n in sizes.items()
            if n > LONG_CLASSES.get(name, MAX_CLASS_LINES)} == {}
    # an exception that was split (or shrank under the limit) comes off the list
    assert [name for name in LONG_CLASSES if sizes.get(name, 0) <= MAX_CLASS_LINES] == []


#: the places where a module still reads or writes another object's private attribute
#: (``x._name``, x not self / cls / a module), by (module, attribute), with the reason
PRIVATE_REACHES = {
    ("edge_plm/commands/doctor.py", "_cache"): "numba's dispatcher cache index: no public API "
        "says whether a kernel is compiled on disk (falls back to the files if it moves)",
    ("edge_plm/commands/doctor.py", "_cache_file"): "the same numba look-up (one place)",
    ("edge_plm/commands/doctor.py", "_load_index"): "the same numba look-up (one place)",
}


def _private_reaches() -> dict[tuple[str, str], list[int]]:
    """(module, attribute) -> lines of every ``x._name`` with x not self, cls, super() or a module."""
    out: dict[tuple[str, str], list[int]] = {}
    for path in MODULES.values():
        tree = ast.parse(path.read_text())
        modules = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                   if isinstance(n, ast.Import) for a in n.names}
        modules |= {a.asname or a.name for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) for a in n.names}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ({"self", "cls"} | modules):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue  # super()._name: the object's own (an override calling its base)
            key = (str(path.relative_to(PACKAGE.parent)), node.attr)
            out.setdefault(key, []).append(node.lineno)
    return out


def test_each_part_owns_its_state():
    """No module reads or writes another object's private attribute: a part that needs it gets
    it as an argument or as a documented public field. The known places are listed above
    with their reason; a new one fails here, and a place that went comes off the list."""
    found = _private_reaches()
    new = {f"{path}: .{attr} (lines {lines})" for (path, attr), lines in found.items()
           if (path, attr) not in PRIVATE_REACHES}
    assert new == set()
    assert [key for key in PRIVATE_REACHES if key not in found] == []


def test_tests_mirror_the_package():
    """A room's tests live in tests/<room>/; only tests of the whole package, the kit and the
    deployment sit directly under tests/. One left there (e.g. by a merge) is filed by
    ``python3 scripts/mirror_tests.py``."""
    import importlib.util  # noqa: PLC0415

    root = PACKAGE.parent
    spec = importlib.util.spec_from_file_location("mirror_tests", root / "scripts" / "mirror_tests.py")
    mirror = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mirror)
    assert mirror.plan() == {}
    folders = {p.name for p in (root / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= mirror.package_rooms() | {"benchmarks"}


def test_the_learner_is_opened_only_in_its_module_and_the_one_way_in():
    """Every part that learns opens the household the same way (`loop/house.py`): the service,
    replays and every command; nothing else constructs a `Learner` or calls `Learner.open`."""
    allowed = {"edge_plm/learning/learner.py", "edge_plm/loop/house.py"}
    found = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "Learner") or (
                    isinstance(f, ast.Attribute) and f.attr == "open"
                    and isinstance(f.value, ast.Name) and f.value.id == "Learner"):
                found.add(str(path.relative_to(PACKAGE.parent)))
    assert found <= allowed, sorted(found - allowed)
    assert "edge_plm/loop/house.py" in found


def _untyped_model_params() -> list[str]:
    """Every parameter in `edge_plm/switch/` named ``model`` that is not annotated ``SwitchModel``,
    and every parameter annotated ``Any``."""
    bad = []
    for name, path in MODULES.items():
        if not _in("edge_plm.switch", name):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            args = node.args
            for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if a is None:
                    continue
                ann = ast.unparse(a.annotation).strip("'\"") if a.annotation is not None else None
                if ann in ("Any", "typing.Any") or (a.arg == "model" and ann != "SwitchModel"):
                    bad.append(f"{path.relative_to(PACKAGE.parent)}:{a.lineno} {a.arg}: {ann}")
    return bad


def test_no_switch_helper_takes_the_model_untyped():
    """The switch model is composed of parts that own their state (`switch/model.py`): a helper
    takes the part it needs, typed, not the whole model as ``model`` / ``Any`` to read or write
    its fields."""
    assert _untyped_model_params() == []


#: the comparisons of a count of devices (or names) with 0, 1 or 2 outside the switch model, by
#: (module, expression), with the reason: one device and several part ways only through
#: `edge_plm.learning.household.several` (its docstring lists where, and why)
DEVICE_COUNTS = {
    ("edge_plm/learning/household.py", "len(devices) > 1"): "the rule itself (`several`)",
    ("edge_plm/commands/device_inspection.py", "len(names) == 1"): "an export line's \"device\" is "
        "one name or a list of the names its label is for (docs/contracts.md), not the household",
    ("edge_plm/voice/answers.py", "len(named) == 1"): "the states a spoken answer names, not devices",
    ("edge_plm/voice/models.py", "len(name) > 1"): "a file name's drive letter, not devices",
}
_COUNTED = ("name", "device", "switch", "relay", "want", "household")


def _device_counts() -> dict[tuple[str, str], list[int]]:
    """(module, expression) -> lines of every ``len(x) <op> 0|1|2`` (either side) whose x
    mentions a device, a name, a switch, a relay, a wish or the household, outside `switch`."""
    out: dict[tuple[str, str], list[int]] = {}
    for name, path in MODULES.items():
        if _in("edge_plm.switch", name):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Compare) and len(node.comparators) == 1):
                continue
            sides = (node.left, node.comparators[0])
            counted = [s for s in sides if isinstance(s, ast.Call) and isinstance(s.func, ast.Name)
                       and s.func.id == "len" and s.args
                       and any(w in ast.unparse(s.args[0]).lower() for w in _COUNTED)]
            small = [s for s in sides if isinstance(s, ast.Constant) and s.value in (0, 1, 2)]
            if counted and small:
                key = (str(path.relative_to(PACKAGE.parent)), ast.unparse(node))
                out.setdefault(key, []).append(node.lineno)
    return out


def test_one_device_is_a_household_of_one():
    """Outside the switch model nothing counts devices to tell one from several: one device is
    the case N = 1 of the general path, and where a promise (a JSON key, a CLI key, a button)
    still differs it asks `Household.several` / `several` (learning/household.py). A new
    ``len(names) == 1`` or ``len(devices) > 1`` fails here; a listed one that went comes off."""
    found = _device_counts()
    assert {f"{p}:{lines} {expr}" for (p, expr), lines in found.items() if (p, expr) not in DEVICE_COUNTS} == set()
    assert [key for key in DEVICE_COUNTS if key not in found] == []
