"""Catalog: the skills found under the skill folders, and the list of them a model is shown.

The model sees only names and descriptions until it activates a skill (the spec's progressive
disclosure), and that list must fit a token budget. When it does not, descriptions are shortened
before any skill is left out, always the same way for the same skills, so the prompt prefix that
holds the list stays byte-identical from one task to the next.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterator, Mapping, Sequence

from runtime.skills.skill import SKILL_FILE, Diagnostic, Skill, load
from store.events import CatalogEntry

HEADER = (
    "Skills you can use. Before following one, read its instructions by replying "
    '{"action": "activate_skill", "skill": "<name>", "reason": "<why>"}.'
)
ELLIPSIS = "…"
# How many folder levels below a skills folder are searched for skills. The spec's client guidance
# suggests scanning several; six holds every public collection seen, and stops a skills folder that
# names a home directory from walking all of it.
MAX_DEPTH = 6
_WHITESPACE = re.compile(r"\s+")
_by_name = operator.attrgetter("name")


@dataclass(frozen=True)
class Catalog:
    skills: Mapping[str, Skill]
    skipped: tuple[Diagnostic, ...] = ()
    warnings: tuple[Diagnostic, ...] = ()

    @property
    def fingerprint(self) -> str:
        """Changes exactly when what the catalog shows, or any loaded skill's SKILL.md, changes."""
        shown = sorted((s.name, s.description, s.content_hash) for s in self.skills.values())
        return hashlib.sha256(json.dumps(shown, ensure_ascii=False).encode()).hexdigest()


def discover(roots: Sequence[Path]) -> Catalog:
    """The skills under `roots`, the first of each name winning (roots in order, then path order).

    Which folders are skills is `skill_folders`'s to say. A skill that cannot be loaded is in
    `skipped`, never silently dropped.
    """
    skills: dict[str, Skill] = {}
    where: dict[str, Path] = {}
    skipped: list[Diagnostic] = []
    warnings: list[Diagnostic] = []
    for root in map(Path, roots):
        if not os.path.isdir(root):
            problem = "is not a folder" if os.path.lexists(root) else "does not exist"
            warnings.append(Diagnostic(root, None, "warning", f"skills folder {problem}; no skills read from it"))
            continue
        for folder in skill_folders(root, warnings):
            skill, diagnostics = load(folder)
            if skill is None:
                skipped.extend(d for d in diagnostics if d.severity == "error")
            elif skill.name in skills:
                skipped.append(
                    Diagnostic(
                        folder / SKILL_FILE,
                        None,
                        "error",
                        f"skill {skill.name!r} is already defined by {where[skill.name]}; this one is left out",
                    )
                )
            else:
                skills[skill.name] = skill
                where[skill.name] = folder / SKILL_FILE
                warnings.extend(skill.warnings)
    return Catalog(MappingProxyType(dict(sorted(skills.items()))), tuple(skipped), tuple(warnings))


def entries(catalog: Catalog, budget_tokens: int, count: Callable[[str], int]) -> list[CatalogEntry]:
    """The catalog's skills by name, as many and as fully described as `budget_tokens` allows.

    Over budget, every description longer than one cap is cut at a word boundary, the cap being the
    largest that fits; if even bare names do not fit, the first skills by name that do are kept and
    the rest left out (fewer entries than `catalog.skills`). `count` is the model's tokenizer, so it
    is called a logarithmic number of times: each search halves the range.
    """
    full = [
        CatalogEntry(name=s.name, description=_one_line(s.description), content_hash=s.content_hash,
                     folder=str(s.folder))
        for s in sorted(catalog.skills.values(), key=_by_name)
    ]

    def fits(shown: Sequence[CatalogEntry]) -> bool:
        return count(render(shown)) <= budget_tokens

    if not full or fits(full):
        return full
    bare = _capped(full, 0)
    if fits(bare):
        # capped(low) fits and capped(high + 1) does not; the longest description uncut is `full`.
        low, high = 0, max(len(e.description) for e in full) - 1
        while low < high:
            mid = (low + high + 1) // 2
            if fits(_capped(full, mid)):
                low = mid
            else:
                high = mid - 1
        return _capped(full, low)
    low, high = 0, len(bare) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if fits(bare[:mid]):
            low = mid
        else:
            high = mid - 1
    return bare[:low]


def render(entries: Sequence[CatalogEntry]) -> str:
    """The catalog block's text: the header, then `- name: description` a line, by name; "" for none."""
    if not entries:
        return ""
    lines = [f"- {_one_line(e.name)}: {_one_line(e.description)}".rstrip() for e in sorted(entries, key=_by_name)]
    return "\n".join([HEADER, *lines])


def skill_folders(root: Path, warnings: list[Diagnostic] | None = None) -> Iterator[Path]:
    """The folders `discover` reads under root, in path order.

    A folder holding a SKILL.md is a skill and is not searched further (one holding it in other
    letters, skill.md say, is yielded too, for load to say what to rename). Any other folder is
    searched, down to MAX_DEPTH levels below root: collections nest (trailofbits/skills keeps its
    skills at plugins/<plugin>/skills/<skill>). Dot-folders, node_modules and __pycache__ are not
    searched, nor a folder already searched through another link. Skills below the bound, and folders
    that cannot be listed, go to `warnings` when given: nothing found is ignored silently. Below the
    bound skills are looked for only as deep again, so that a home directory named as a skills folder
    is not walked whole; folders deeper than that are one warning for the root, since a skill in them
    would not be loaded either.
    """
    warnings = [] if warnings is None else warnings
    searched: set[str] = set()
    unsearched: Path | None = None  # the first folder below even the reporting search's bound
    pending = [(root, 0)]
    while pending:
        folder, depth = pending.pop()
        listing = _listing(folder, warnings)
        if listing is None:
            continue
        names, subfolders = listing
        if any(name.lower() == SKILL_FILE.lower() for name in names):
            yield folder
            continue
        real = os.path.realpath(folder)
        if real in searched:
            continue  # a link back to a folder searched already: a loop, or the same skills twice
        searched.add(real)
        if depth < MAX_DEPTH:
            pending.extend((sub, depth + 1) for sub in reversed(subfolders))
        elif subfolders:
            deeper, beyond = _first_skill_below(subfolders, MAX_DEPTH)
            if deeper is not None:
                message = (
                    f"skills below this folder are more than {MAX_DEPTH} folders deep under {root} and are not "
                    f"loaded (the first: {deeper}); name a folder nearer to them in skills_dirs"
                )
                warnings.append(Diagnostic(folder, None, "warning", message))
            elif unsearched is None:
                unsearched = beyond
    if unsearched is not None:
        message = (
            f"folders more than {2 * MAX_DEPTH} levels below {root} are not searched, so no skill in them is "
            f"loaded (the first: {unsearched}); name a folder nearer to them in skills_dirs"
        )
        warnings.append(Diagnostic(unsearched, None, "warning", message))


def _first_skill_below(folders: list[Path], levels: int) -> tuple[Path | None, Path | None]:
    """The first SKILL.md within `levels` levels of `folders`, searched as skill_folders searches; when
    there is none, the first folder deeper than that, which was not searched (None if none is)."""
    beyond: Path | None = None
    pending = [(f, 1) for f in reversed(folders)]
    while pending:
        folder, depth = pending.pop()
        listing = _listing(folder, [])
        if listing is None:
            continue
        names, subfolders = listing
        marker = next((n for n in names if n.lower() == SKILL_FILE.lower()), None)
        if marker is not None:
            return folder / marker, None
        if depth < levels:
            pending.extend((sub, depth + 1) for sub in reversed(subfolders))
        elif subfolders and beyond is None:
            beyond = subfolders[0]
    return None, beyond


def _listing(folder: Path, warnings: list[Diagnostic]) -> tuple[list[str], list[Path]] | None:
    """The names in `folder` and its subfolders worth searching, both sorted; None if it cannot be listed."""
    try:
        with os.scandir(folder) as entries:
            found = [(e.name, not _skipped(e.name) and e.is_dir()) for e in entries]
    except OSError as e:
        warnings.append(Diagnostic(folder, None, "warning", f"cannot list this folder: {e.strerror or e}"))
        return None
    found.sort()
    return [name for name, _ in found], [folder / name for name, is_folder in found if is_folder]


def _skipped(name: str) -> bool:
    # Never skills: version control and caches, and a JavaScript project's dependencies, which can
    # hold thousands of folders.
    return name.startswith(".") or name in ("__pycache__", "node_modules")


def _capped(full: Sequence[CatalogEntry], cap: int) -> list[CatalogEntry]:
    return [
        e if len(e.description) <= cap else e.model_copy(update={"description": _shorten(e.description, cap),
                                                                 "shortened": True})
        for e in full
    ]


def _shorten(text: str, cap: int) -> str:
    """At most `cap` characters of one-line text, ending at a word boundary where there is one, then "…"."""
    if cap < 2:
        return ""
    head = text[: cap - 1]
    if not text[cap - 1].isspace():
        # The cut falls inside a word: end before it, unless it is the first word.
        space = head.rfind(" ")
        if space > 0:
            head = head[:space]
    return head.rstrip() + ELLIPSIS


def _one_line(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()
