"""The README and docs/ name only repository paths that exist and `agentd` commands that are real."""

from __future__ import annotations

import fnmatch
import functools
import importlib
import re
import shlex
from pathlib import Path

import click

from runtime.cli import COMMANDS
from tests.helpers import REPO

ROOT = REPO

# Commands the docs may describe before they exist, each removed once its command is in the CLI, so that the
# docs are held to it like every other command.
NOT_YET_COMMANDS: set[tuple[str, str]] = set()

# Paths the docs name that live in an eval case's workspace, not in this repository (a file the quality
# model read in a recorded run).
NOT_REPOSITORY_PATHS = {"docs/changelog.md"}

# The README is the front door: what agentd is, set-up, a first task, the daemon, approvals, undo, where to
# read on. Detail belongs in docs/.
README_MAX_LINES = 200

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
# An inline code span: a run of backticks, then anything up to the same run (``a `b` c`` holds a backtick).
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)
# A shell comment in a code block: ` # ...` after the command (the comment may show commands in backticks).
COMMENT = re.compile(r"\s#\s")
ROOT_OPTIONS_WITH_VALUE = {"--config", "--data-dir"}


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def split_page(text: str) -> tuple[str, list[str]]:
    """The page's prose (code blocks' comments included) and its code blocks' command lines."""
    commands: list[str] = []
    comments: list[str] = []
    for block in FENCE.findall(text):
        for line in block.splitlines()[1:-1]:
            found = COMMENT.search(line)
            command, comment = (line[: found.start()], line[found.end():]) if found else (line, "")
            commands.append(command.strip())
            comments.append(comment)
    return FENCE.sub("", text) + "\n" + "\n".join(comments), commands


def spans(prose: str) -> list[str]:
    return [" ".join(body.split()) for _, body in SPAN.findall(prose)]


@functools.cache
def top_level() -> frozenset[str]:
    # Dot-entries (.venv, .agentd, .git) are the machine's, not the repository's: the docs name them as such.
    return frozenset(p.name for p in ROOT.iterdir() if not p.name.startswith("."))


def named_paths(text: str) -> list[str]:
    """Words of the text that name something in the repository: paths whose first part is a top-level entry."""
    found = []
    for word in text.split():
        word = word.strip("\"'()[],;").removeprefix("./")
        first = word.split("/")[0]
        # A bare name is a path only as a pattern (`requirements*.lock`): a bare top-level name always exists.
        if ("/" in word or "*" in word) and any(fnmatch.fnmatchcase(name, first) for name in top_level()):
            found.append(word)
    return found


def exists(path: str) -> bool:
    if any(c in path for c in "*?["):
        return any(ROOT.glob(path.rstrip("/")))
    return (ROOT / path).exists()


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = FENCE.sub("", page.read_text())
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in HEADING.findall(text)}


def missing_paths(page: Path, text: str) -> list[str]:
    """Every path the page's text names in backticks or a code block, and every link, that leads nowhere."""
    prose, commands = split_page(text)
    missing = []
    for path in [p for s in spans(prose) for p in named_paths(s)] + [p for c in commands for p in named_paths(c)]:
        if path not in NOT_REPOSITORY_PATHS and not exists(path):
            missing.append(path)
    for target in LINK.findall(prose):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            missing.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            missing.append(target)
    return missing


@functools.cache
def command_table() -> dict[str, frozenset[str] | None]:
    """Each root command, with its subcommands if it is a group (None if it is not)."""
    table: dict[str, frozenset[str] | None] = {}
    for name, (module, attribute, _) in COMMANDS.items():
        command = getattr(importlib.import_module(module), attribute)
        table[name] = frozenset(command.commands) if isinstance(command, click.Group) else None
    return table


def words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # a quote left open by a placeholder
        return command.split()


def unknown_commands(invocation: str) -> list[str]:
    """The commands and subcommands an `agentd ...` line shows that the CLI does not have.

    `agentd start | stop | status` and `agentd approvals list | approve ID` show alternatives: a part that
    is not a command of its own is a subcommand of the group before it.
    """
    table = command_table()
    unknown = []
    group = None
    for n, part in enumerate(invocation.split(" | ")):
        argv = words(part)
        if n == 0:
            argv = argv[1:]  # "agentd"
            while argv and argv[0].startswith("-"):
                if argv[0] in ("--help", "-h", "--version"):
                    return unknown
                argv = argv[2:] if argv[0] in ROOT_OPTIONS_WITH_VALUE else argv[1:]
        if not argv or argv[0] == "...":  # "agentd --config FILE ...": any command
            continue
        if n > 0 and argv[0] not in table and group is not None:
            argv = [group, *argv]
        name, rest = argv[0], argv[1:]
        if name not in table:
            unknown.append(f"agentd {name}")
            group = None
            continue
        group = name if table[name] is not None else None
        if group is not None and rest and not rest[0].startswith("-"):
            sub = rest[0]
            if sub not in table[name] and (name, sub) not in NOT_YET_COMMANDS:
                unknown.append(f"agentd {name} {sub}")
    return unknown


def invocations(page: Path) -> list[str]:
    prose, commands = split_page(page.read_text())
    shown = [s for s in spans(prose) if s.startswith("agentd ")]
    return shown + [c for c in commands if c.startswith("agentd ")]


def where(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_every_path_and_link_the_docs_name_exists() -> None:
    missing = [f"{where(page)}: {path}" for page in pages() for path in missing_paths(page, page.read_text())]
    assert missing == []


def test_every_agentd_command_the_docs_show_is_a_real_command() -> None:
    unknown = [f"{where(page)}: {u} (in `{line}`)" for page in pages() for line in invocations(page)
               for u in unknown_commands(line)]
    assert unknown == []


def test_every_docs_page_can_be_reached_from_the_readme() -> None:
    reached, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        prose, _ = split_page(page.read_text())
        for target in LINK.findall(prose):
            resolved = (page.parent / target.partition("#")[0]).resolve()
            if resolved.is_dir():
                resolved = resolved / "README.md"
            if resolved.suffix == ".md" and resolved.is_relative_to(ROOT / "docs") and resolved.exists():
                todo.append(resolved)
    assert sorted(where(p) for p in pages() if p not in reached) == []


def test_the_readme_stays_a_front_door() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= README_MAX_LINES


def test_a_path_or_link_that_leads_nowhere_is_reported() -> None:
    text = (
        "The loop is in `runtime/agent/loop.py`, and `runtime/agent/no_such_module.py` is not.\n"
        "```sh\nagentd eval tasks examples/evals/no_such_cases.yaml   # `bench/no_such_bench.py` too\n```\n"
        "Read [the store](store.md), [nothing](no_such_page.md) and [a lost section](store.md#no-such-heading).\n"
    )
    missing = missing_paths(ROOT / "docs" / "a-new-page.md", text)
    assert sorted(missing) == sorted([
        "runtime/agent/no_such_module.py", "examples/evals/no_such_cases.yaml", "bench/no_such_bench.py",
        "no_such_page.md", "store.md#no-such-heading",
    ])


def test_a_command_the_cli_does_not_have_is_reported() -> None:
    assert unknown_commands("agentd task frobnicate ID") == ["agentd task frobnicate"]
    assert unknown_commands("agentd frobnicate") == ["agentd frobnicate"]
    assert unknown_commands("agentd approvals list | approve ID | forget ID") == ["agentd approvals forget"]
    assert unknown_commands("agentd --config x.toml task show ID --calls") == []
    assert unknown_commands("agentd start | stop | status") == []
    assert unknown_commands("agentd task undo ID --dry-run") == []  # allowed until it exists
