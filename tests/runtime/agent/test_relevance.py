"""Which files a request points at (runtime.agent.relevance): pure, words in, paths out."""

from __future__ import annotations

from runtime.agent.relevance import commands, focus, new_paths

FILES = {
    "README.md", "pyproject.toml", "todo.txt", "notes/meeting-2026-11-03.md", "notes/ideas.md", "src/app.py",
    "src/utils.py", "config/app.toml", "config/database.toml", "data/orders.csv", "logs/app.log", "docs/faq.md",
}


def test_a_request_naming_a_path_points_at_that_file_alone() -> None:
    assert focus("How many orders are in data/orders.csv?", FILES) == {"data/orders.csv"}
    assert focus("Run `python3 src/app.py` and tell me what it prints.", FILES) == {"src/app.py"}


def test_a_file_name_without_its_folder_or_extension_names_it() -> None:
    assert focus("Copy the first item of my todo list (todo.txt) into next.txt.", FILES) == {"todo.txt"}
    assert focus("What email address do I write to? Look in the README.", FILES) == {"README.md"}
    assert focus("Which file has the database settings?", FILES) == {"config/database.toml"}


def test_a_folder_or_a_word_of_a_path_points_at_the_files_there() -> None:
    assert focus("When is the Q3 report due? It is somewhere in my notes.", FILES) == {
        "notes/meeting-2026-11-03.md", "notes/ideas.md",
    }
    assert focus("Which Python files are in the src folder?", FILES) == {"src/app.py", "src/utils.py"}


def test_a_request_that_points_at_no_file_points_at_all_of_them() -> None:
    assert focus("Summarise this project for me.", FILES) == FILES
    assert focus("", FILES) == FILES


def test_a_name_inside_a_longer_name_is_not_a_mention() -> None:
    assert focus("What does myapp.py do?", {"app.py", "myapp.py"}) == {"myapp.py"}


def test_new_paths_are_the_file_names_the_request_gives_that_do_not_exist() -> None:
    assert new_paths("Create a file hello.txt that says: Hello, world!", FILES) == {"hello.txt"}
    assert new_paths("Make customers.txt from data/orders.csv.", FILES) == {"customers.txt"}
    assert new_paths("Save a copy of todo.txt as ../todo-backup.txt.", FILES) == {"../todo-backup.txt"}
    assert new_paths("Write to help@tidy.example.org, e.g. about version 1.4.2.", FILES) == set()
    assert new_paths("Fix the typo in README.md", FILES) == set()


def test_the_commands_a_request_gives_are_its_code_spans_where_it_asks_to_run_something() -> None:
    assert commands("Run `python3 src/app.py` and tell me what it prints.") == ("python3 src/app.py",)
    assert commands("Execute `make build`, then `make test`.") == ("make build", "make test")
    assert commands("In src/app.py, rename `greet` to `welcome`.") == ()
    assert commands("Run the tests.") == ()
