"""`agentd skills`: list, show and validate Agent Skills, and add one after a review of what it would run."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Iterable

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.errors import InvalidCommand, NotFound
from runtime.output import echo_json, fields_table, table
from runtime.skills import catalog, review as skill_review, skill as skill_file
from runtime.skills.skill import SKILL_FILE, Diagnostic, Skill
from store.errors import AgentdError


class MissingPath(NotFound):
    """A path named on the command line does not exist: a usage error, so it exits 2 as click's own do."""

    exit_code = 2


@click.group()
def skills() -> None:
    """Agent Skills: folders with a SKILL.md whose instructions the model can load when a task needs them.

    agentd reads the folders in the skills_dirs setting (default: ./skills). A running agentd picks up
    added, changed and removed skills for its next task; no restart is needed.
    """


@skills.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """Loaded skills, then every skill found but not loaded with the reason, then warnings."""
    roots = app.settings().skills_dirs
    found = catalog.discover(roots)
    loaded = sorted(found.skills.values(), key=lambda s: s.name)
    if as_json:
        echo_json({
            "skills": [_skill_dict(s) for s in loaded],
            "skipped": [_diagnostic_dict(d) for d in found.skipped],
            "warnings": [_diagnostic_dict(d) for d in found.warnings],
        })
        return
    if loaded:
        click.echo(table(
            [(s.name, _near(s.folder), len(s.files()), s.description) for s in loaded],
            ["NAME", "FOLDER", "FILES", "DESCRIPTION"],
        ))
    else:
        click.echo(f"no skills loaded from {', '.join(map(str, roots)) or '(no skills_dirs)'}")
    _section("not loaded", found.skipped)
    _section("warnings", found.warnings)


@skills.command()
@click.argument("name")
@json_option
@pass_app
def show(app: App, name: str, as_json: bool) -> None:
    """Everything about the loaded skill NAME: its fields, content hash, files and warnings, then its instructions."""
    found = catalog.discover(app.settings().skills_dirs)
    shown = found.skills.get(name)
    if shown is None:
        raise NotFound(_not_loaded(name, found))
    if as_json:
        echo_json({**_skill_dict(shown), "body": shown.body})
        return
    click.echo(fields_table([
        ("name", shown.name),
        ("description", shown.description),
        ("license", shown.license),
        ("compatibility", shown.compatibility),
        ("allowed-tools", " ".join(shown.allowed_tools) or None),
        ("metadata", ", ".join(f"{k}={v}" for k, v in shown.metadata.items()) or None),
        ("content hash", shown.content_hash),
        ("folder", shown.folder),
        ("files", ", ".join(shown.files()) or None),
        ("unknown fields", ", ".join(f"{k}={_plain(v)}" for k, v in shown.unknown_fields.items()) or None),
    ]))
    _section("warnings", shown.warnings)
    click.echo("")
    click.echo(shown.body.rstrip("\n"))


@skills.command()
@click.argument("paths", metavar="[PATH]...", nargs=-1, type=click.Path(path_type=Path))
@pass_app
def validate(app: App, paths: tuple[Path, ...]) -> None:
    """Check skills strictly, as an author should before sharing one; exits 1 if any has an error.

    PATH is a skill folder, its SKILL.md, or a folder of skills; without PATH, every skill in the
    skills_dirs folders. Prints each problem as `path:line: message`, then a summary.
    """
    for path in paths:
        _must_exist(path)
    found: list[Diagnostic] = []  # what the search itself reports: skills too deep to load, unlistable folders
    if paths:
        folders = [f for path in paths for f in _folders_named_by(path, found)]
    else:
        folders = [
            f for root in app.settings().skills_dirs if root.is_dir() for f in catalog.skill_folders(root, found)
        ]
    diagnostics = [*found, *(d for folder in folders for d in skill_file.validate(folder))]
    for d in diagnostics:
        click.echo(d)
    errors = sum(d.severity == "error" for d in diagnostics)
    warnings = len(diagnostics) - errors
    click.echo(
        f"{_count(len(folders), 'skill')} checked: {_count(errors, 'error')}, {_count(warnings, 'warning')}"
        if folders else "no skills found"
    )
    if errors:
        click.get_current_context().exit(1)


@skills.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--yes", is_flag=True, help="Install without asking once the review is printed.")
@click.option(
    "--into", type=click.Path(path_type=Path, file_okay=False),
    help="Skills folder to install into (default: the first of skills_dirs).",
)
@pass_app
def add(app: App, path: Path, yes: bool, into: Path | None) -> None:
    """Copy the skill folder PATH into a skills folder, after a strict check and a review of what it would run.

    The review shows first the tools the skill pre-approves (allowed-tools) and what each then does
    without asking; then every script with its size and hash; then what needs a look, by severity, each
    with its file and line: deletes in your home folder, reads of keys, decoded or downloaded code,
    obfuscated calls, instructions to ignore rules, network access, commands run from strings, and
    anything that reaches outside the folder.
    """
    _must_exist(path)
    folder = path if path.is_dir() else path.parent
    problems = skill_file.validate(folder)
    for d in problems:
        click.echo(d)
    errors = sum(d.severity == "error" for d in problems)
    if errors:
        raise InvalidCommand(f"{folder} is not a valid skill ({_count(errors, 'error')}); nothing was installed")
    loaded, _ = skill_file.load(folder)
    assert loaded is not None  # strict validation passed, so the lenient load does
    into = into if into is not None else _first_skills_dir(app)
    destination = into / loaded.name

    review = skill_review.review(folder, loaded.allowed_tools)
    _print_review(review)
    if not review.self_contained:
        raise InvalidCommand(
            f"{loaded.name} reaches outside its folder (see the review); a skill must be self-contained, "
            "nothing was installed"
        )
    if os.path.lexists(destination):
        raise InvalidCommand(f"{destination} already exists; remove it first to install {loaded.name} again")
    if not yes and not click.confirm(f"Install {loaded.name} into {into}?", default=False):
        raise InvalidCommand(f"{loaded.name} was not installed")
    install(folder, destination)
    click.echo(f"installed {loaded.name} into {destination}")
    click.echo("a running agentd picks it up for its next task; no restart needed")


def install(folder: Path, destination: Path) -> None:
    """Copy beside the destination, then rename: a reader sees no skill or the whole skill, never half of one."""
    # A dot folder, so a catalog scan in the meantime does not take the partial copy for a skill.
    partial = destination.parent / f".{destination.name}.partial-{secrets.token_hex(4)}"
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(folder, partial, symlinks=True, ignore=shutil.ignore_patterns(*skill_review.IGNORED_NAMES))
        if os.path.lexists(destination):
            raise InvalidCommand(f"{destination} appeared while copying; nothing was installed")
        os.rename(partial, destination)
    except OSError as e:
        raise AgentdError(f"could not install into {destination}: {e}; nothing was installed") from e
    finally:
        if os.path.lexists(partial):
            shutil.rmtree(partial, ignore_errors=True)


SEVERITY_HEADINGS = {
    "high": "read these before installing",
    "medium": "worth a look",
    "low": "for the record",
}


def _print_review(review: skill_review.Review) -> None:
    click.echo(f"review of {review.folder}:")
    # First: what the skill may do without asking anyone, which no line-by-line finding shows.
    if review.pre_approved:
        where = f"SKILL.md:{review.allowed_tools_line}, " if review.allowed_tools_line else ""
        click.echo(
            f"pre-approved tools ({where}allowed-tools): a task that takes in this skill runs these without asking you"
        )
        width = max(len(p.tool) for p in review.pre_approved)
        for p in review.pre_approved:
            click.echo(f"  {p.tool:<{width}}  {p.means}")
    else:
        click.echo("pre-approved tools: none; every call that needs your approval still asks you")
    if review.scripts:
        click.echo(f"scripts ({len(review.scripts)}):")
        rows = [
            (s.path, _size(s.size), f"sha256:{s.sha256[:12]}", "yes" if s.executable else "no") for s in review.scripts
        ]
        click.echo(_indent(table(rows, ["PATH", "SIZE", "HASH", "EXECUTABLE"])))
    else:
        click.echo("scripts: none")
    if not review.findings:
        click.echo("needs a look: nothing flagged")
    for severity, findings in review.by_severity().items():
        if findings:
            click.echo(f"{severity} ({len(findings)}): {SEVERITY_HEADINGS[severity]}")
            for finding in findings:
                click.echo(f"  {finding}")


def _first_skills_dir(app: App) -> Path:
    dirs = app.settings().skills_dirs
    if not dirs:
        raise InvalidCommand("no skills folder is configured (skills_dirs is empty); pass --into")
    return dirs[0]


def _must_exist(path: Path) -> None:
    if not os.path.lexists(path):
        raise MissingPath(f"{path} does not exist")


def _folders_named_by(path: Path, warnings: list[Diagnostic]) -> list[Path]:
    if not path.is_dir():
        return [path.parent]  # its SKILL.md (or any file in it), whatever kind of file that is
    # Neither a skill nor a folder of skills: validating it as a skill says what is missing.
    return list(catalog.skill_folders(path, warnings)) or [path]


def _not_loaded(name: str, found: catalog.Catalog) -> str:
    reasons = [d for d in found.skipped if _folder_of(d.path).name == name]
    if reasons:
        return f"skill {name!r} was found but not loaded: {reasons[0]}"
    known = ", ".join(sorted(found.skills)) or "none"
    return f"no skill {name!r}; loaded skills: {known}"


def _section(title: str, diagnostics: Iterable[Diagnostic]) -> None:
    diagnostics = list(diagnostics)
    if diagnostics:
        click.echo(f"\n{title} ({len(diagnostics)}):")
        for d in diagnostics:
            click.echo(f"  {d}")


def _folder_of(path: Path) -> Path:
    return path.parent if path.name == SKILL_FILE else path


def _diagnostic_dict(d: Diagnostic) -> dict[str, Any]:
    return {"path": str(d.path), "line": d.line, "severity": d.severity, "message": d.message}


def _skill_dict(s: Skill) -> dict[str, Any]:
    return {
        "name": s.name,
        "description": s.description,
        "folder": str(s.folder),
        "files": list(s.files()),
        "license": s.license,
        "compatibility": s.compatibility,
        "metadata": dict(s.metadata),
        "allowed_tools": list(s.allowed_tools),
        "unknown_fields": json.loads(_plain(dict(s.unknown_fields))),
        "content_hash": s.content_hash,
        "warnings": [_diagnostic_dict(d) for d in s.warnings],
    }


def _near(path: Path) -> Path:
    """Relative to the working folder when under it, as the skills_dirs setting usually is: shorter, so the
    description keeps more of the table's width."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def _plain(value: Any) -> str:
    # Unknown fields hold whatever YAML made of them, dates included; their text is good enough to show.
    return json.dumps(value, ensure_ascii=False, default=str)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
