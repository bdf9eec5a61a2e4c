"""The rooms of the house and their floors (docs/architecture.md, "The layout"): a room is a
package or module right under seqtasks/ (or apps/, bench/, data_prep/), an arrow every import
statement of one room's files that names another room (at the top of a file or inside a
function, under TYPE_CHECKING too), and a room's floor one above the highest floor it imports.
Read from the source with `ast`, independently of Python's import machinery."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from conftest import REPO

from seqtasks.registry import BUILT_IN

TOP = ("apps", "bench", "data_prep")
TASKS = {package.removeprefix("seqtasks.") for package in BUILT_IN.values()}
MOST_FLOORS = 9


def room_of(module: str) -> str | None:
    """`seqtasks.translation.task` -> "translation"; `seqtasks` itself -> "seqtasks"."""
    parts = module.split(".")
    if parts[0] != "seqtasks":
        return None
    return parts[1] if len(parts) > 1 else "seqtasks"


def arrows(root: Path = REPO) -> dict[str, set[str]]:
    """Each room's rooms imported, by its files' import statements."""
    found: dict[str, set[str]] = {}
    files = [*root.glob("seqtasks/**/*.py"), *(p for top in TOP for p in root.glob(f"{top}/*.py"))]
    for path in files:
        parts = path.relative_to(root).parts
        if parts[0] == "seqtasks":
            room = parts[1].removesuffix(".py") if len(parts) > 1 else "seqtasks"
            room = "seqtasks" if room == "__init__" else room
        else:
            room = parts[0]
        targets = found.setdefault(room, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
                if node.module == "seqtasks":  # from seqtasks import translation
                    names = [f"seqtasks.{alias.name}" for alias in node.names]
            for name in names:
                target = room_of(name)
                if target is not None and target != room and target != "seqtasks":
                    targets.add(target)
    return found


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each room's floor; an AssertionError naming a cycle of rooms."""

    @cache
    def floor(room: str, path: tuple[str, ...] = ()) -> int:
        assert room not in path, f"rooms import each other: {' -> '.join((*path, room))}"
        return 1 + max((floor(t, (*path, room)) for t in graph.get(room, ())), default=0)

    return {room: floor(room) for room in graph}


def test_rooms_import_only_rooms_below_them():
    graph = arrows()
    found = floors(graph)
    assert max(found.values()) <= MOST_FLOORS, sorted(found.items(), key=lambda r: -r[1])
    generic = set(graph) - TASKS - set(TOP)
    knows_a_task = {room: sorted(graph[room] & TASKS) for room in generic if graph[room] & TASKS}
    assert not knows_a_task, f"generic rooms that import a task's folder: {knows_a_task}"
    crossed = {room: sorted(graph[room] & (TASKS - {room})) for room in TASKS}
    assert not any(crossed.values()), f"tasks that import each other: {crossed}"
    assert all(found[top] > found[task] for top in TOP for task in TASKS if top in found)


def test_the_floors_see_a_cycle_and_an_import_inside_a_function(tmp_path):
    """The reading itself: an import inside a function counts, and two rooms that import each
    other are refused by name."""
    package = tmp_path / "seqtasks"
    (package / "low").mkdir(parents=True)
    (package / "low" / "__init__.py").write_text("def f():\n    from seqtasks.high import x\n")
    (package / "high.py").write_text("from seqtasks.low import y\n")
    graph = arrows(tmp_path)
    assert graph["low"] == {"high"} and graph["high"] == {"low"}
    try:
        floors(graph)
    except AssertionError as error:
        assert "rooms import each other: " in str(error)
    else:
        raise AssertionError("a cycle of rooms was not seen")
    (package / "low" / "__init__.py").write_text("x = 1\n")
    assert floors(arrows(tmp_path)) == {"low": 1, "high": 2}


def test_search_names_no_concrete_decoder():
    """`search/` reaches decoders through their contract only (`decoders/base.py`: `step`,
    `search_widths`, `fixed_cache_steps`, …), so that a new decoder joins search, its budget
    and its CUDA graphs by implementing the contract, with no edit there."""
    imported = set()
    for path in (REPO / "seqtasks" / "search").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add((path.name, node.module))
            elif isinstance(node, ast.Import):
                imported |= {(path.name, alias.name) for alias in node.names}
    parts = {
        (name, module)
        for name, module in imported
        if module.startswith(("seqtasks.decoders", "seqtasks.encoders", "seqtasks.attention"))
    }
    contracts = {f"seqtasks.{room}.base" for room in ("decoders", "encoders", "attention")}
    assert {module for _, module in parts} <= contracts, sorted(parts)
