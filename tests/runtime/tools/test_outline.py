"""read_file counts a file's countable parts by code: a JSON file's items, a Python module's functions
and classes, a text file's list items under each heading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.artifacts import ArtifactStore
from runtime.tools import ToolContext, execute
from runtime.tools.files import ReadFile
from runtime.tools.outline import MAX_NAMES, outline

MODULE = '''"""Helpers for the rainfall table."""

DEFAULT_LIMIT = 64


def summarise_rows(items):
    def inner(x):
        return x
    return [item for item in items if item]


async def fetch(items):
    return items


class Store:
    def load(self):
        pass

    def save(self):
        pass
'''


def test_a_modules_top_level_functions_and_classes_are_counted_with_their_names() -> None:
    # Asked how many functions a module defined, the default model answered with one function's name.
    assert outline("src/pkg/io.py", MODULE) == {
        "functions": "2 (summarise_rows, fetch)",
        "classes": "1 (Store)",
        "methods of Store": "2 (load, save)",
    }


def test_a_json_lists_items_and_an_objects_lists_are_counted() -> None:
    people = [{"name": n} for n in ("Kira", "Ana", "Tomas", "Yara")]
    assert outline("team.json", json.dumps(people, indent=2)) == {"items": "4"}
    settings = {"name": "x", "servers": ["a", "b", "c"], "limits": {"cpu": 2, "mem": 4}}
    assert outline("config/settings.json", json.dumps(settings)) == {
        "keys": "3", "items in servers": "3", "items in limits": "2",
    }


def test_list_items_are_counted_under_each_heading() -> None:
    todo = "- call the insurance office\n- book the venue\n* order new labels\n1. answer the mail\n"
    assert outline("TODO.txt", todo) == {"list items": "4"}
    notes = "# Meeting\n\n- Ana chairs\n\n## Action items\n\n- send the minutes\n- book the room\n"
    assert outline("notes/meeting.md", notes) == {
        "list items under 'Meeting'": "1", "list items under 'Action items'": "2",
    }
    before = "- first\n- second\n\n## Later\n\n- third\n"
    assert outline("plan.md", before) == {
        "list items before the first heading": "2", "list items under 'Later'": "1",
    }


@pytest.mark.parametrize(("name", "content"), [
    ("broken.json", "{not json"),
    ("broken.py", "def f(:\n"),
    ("constants.py", "X = 1\n"),
    ("prose.md", "Just a paragraph.\n\nAnother one.\n"),
    ("one.txt", "- a single item\n"),
    ("server.log", "- 12:00 started\n- 12:01 stopped\n"),
    ("scalar.json", "42"),
])
def test_a_file_with_nothing_to_count_or_that_does_not_parse_has_no_outline(name: str, content: str) -> None:
    assert outline(name, content) is None


def test_a_long_list_of_names_is_cut_but_its_count_is_whole() -> None:
    module = "".join(f"def f{i}():\n    pass\n\n\n" for i in range(MAX_NAMES + 5))
    shown = outline("many.py", module)["functions"]
    assert shown.startswith(f"{MAX_NAMES + 5} (f0, f1,") and shown.endswith(", ...)")


def test_read_file_hands_the_outline_over_beside_the_content(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    ctx = ToolContext(task_id="task-1", tenant="acme", actor="agent", workspace=workspace,
                      artifacts=ArtifactStore(tmp_path / "data" / "artifacts"))
    (workspace / "src" / "io.py").write_text(MODULE)
    observation = execute(ReadFile(), ctx, {"path": "src/io.py"}).observation
    assert observation["outline"]["functions"] == "2 (summarise_rows, fetch)"
    assert observation["content"] == MODULE
