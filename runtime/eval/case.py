"""Eval cases: seed 000's task-set format plus what workspace tasks need, loaded and checked strictly.

A case file is YAML: either a list of cases (seed 000's format as it stands) or a mapping with
`defaults:` (merged into each case) and `cases:`. Anything the format does not know is an error, and
so is a path that does not exist, a regex that does not compile, or a placeholder nobody fills in:
the first one found is reported in one line naming the file, the case and the field, before anything
runs. A typo in `forbidden_tools` would otherwise make the check pass by checking nothing.

Paths to things outside the scratch folder (`plugins`, `skills_dirs`, `copy` sources) are relative to
the case file, so a file runs the same from any folder. Paths inside a run (`files`, `copy`
destinations, `knowledge`) are relative to the run's scratch folder or workspace and may not leave it.
"""

from __future__ import annotations

import re
import string
from datetime import date
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from store.errors import AgentdError
from store.events.task import Granted

Ending = Literal["completed", "escalated", "awaiting_approval", "failed"]
Decision = Literal["grant", "deny"]

# What `{name}` may stand for in an `env` value: the run's folders, known only once the run starts.
PLACEHOLDERS = ("scratch", "workspace", "data_dir", "case_dir")
# Steps a case may take when it sets no `expect.max_steps`: the runtime's own cap (40) would let a
# looping small model spend minutes on a run the eval already knows is lost.
DEFAULT_MAX_STEPS = 10


class CaseFileError(AgentdError):
    """A case file cannot be used as it is; nothing has run."""

    exit_code = 2


class _Strict(BaseModel):
    # YAML reads `plan: 3` as a number; a fact or a needle is text all the same.
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)


Needle = str | tuple[str, ...]
"""Text an answer must contain, case-insensitively; a list means any one of them (`[3, three]`)."""


class Keep(_Strict):
    """Lines of a file that must survive the run: every line it had before (`all`), bar the lines that
    hold one of the `except` texts (what the request asks to change), or only the `lines` listed.

    Written `keep: all`, `keep: {except: [text, ...]}` or `keep: [line, ...]`. Lines compare without
    the white space around them, and blank lines do not count: a line the run kept but re-indented
    or moved is kept, a line it dropped or rewrote is lost."""

    all: bool = False
    except_: tuple[str, ...] = Field((), alias="except")
    lines: tuple[str, ...] = ()

    def exempts(self, line: str) -> bool:
        low = line.lower()
        return any(text.lower() in low for text in self.except_)


class FileExpect(_Strict):
    """What one file in the workspace must look like after the run."""

    contains: tuple[Needle, ...] = ()
    not_contains: tuple[str, ...] = ()
    equals: str | None = None
    matches: str | None = None
    absent: bool = False
    keep: Keep | None = None

    @field_validator("contains", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("keep", mode="before")
    @classmethod
    def _keep(cls, v: Any) -> Any:
        if v is None or isinstance(v, Keep):
            return v
        if v == "all":
            return {"all": True}
        if isinstance(v, dict) and set(v) == {"except"}:
            texts = v["except"]
            texts = [texts] if isinstance(texts, str) else texts
            if not texts:
                raise ValueError("except: name at least one text; `keep: all` keeps every line")
            return {"all": True, "except": texts}
        if isinstance(v, list) and v:
            return {"lines": v}
        raise ValueError("write `keep: all`, `keep: {except: [text, ...]}` or `keep: [line, ...]`")

    @property
    def checks_content(self) -> bool:
        """Whether anything but `keep` is asked of the file: then it must exist, whatever it keeps."""
        return bool(self.contains or self.not_contains or self.equals is not None or self.matches or self.absent)

    @field_validator("matches")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        return _regex(v)

    @model_validator(mode="after")
    def _absent_alone(self) -> FileExpect:
        if self.absent and (self.contains or self.equals is not None or self.matches or self.not_contains or self.keep):
            raise ValueError("absent: true cannot be combined with checks of the file's content")
        return self


class Expect(_Strict):
    """The machine checks of a run; every one is read from the run's events or its workspace."""

    ending: tuple[Ending, ...] = ("completed",)
    answer_contains: tuple[Needle, ...] = ()
    answer_matches: str | None = None
    answer_not_contains: tuple[str, ...] = ()
    files: dict[str, FileExpect] = {}
    # `all`: every file the case lays out keeps every line it had, except as its own `keep` says: a
    # change the request never asked for, anywhere, is a lost line.
    keep: Literal["all"] | None = None
    max_steps: int | None = Field(None, ge=1)
    # The largest request any call of the run may be, in prompt tokens: window stuffing, measured.
    max_prompt_tokens: int | None = Field(None, ge=1)

    @field_validator("ending", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("answer_contains", mode="before")
    @classmethod
    def _needles(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("answer_matches")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        return _regex(v)

    @field_validator("files")
    @classmethod
    def _inside(cls, v: dict[str, FileExpect]) -> dict[str, FileExpect]:
        for path in v:
            # `..` may reach the run's scratch folder around the workspace (a write that escaped it),
            # never further: the check reads nothing outside the run.
            _relative(path, allow_up=1)
        return v


class _Shared(_Strict):
    """Fields a file's `defaults:` may set for all its cases."""

    group: str | None = None
    plugins: tuple[str, ...] = ()
    skills_dirs: tuple[str, ...] = ()
    profile: str | None = None
    tenant: str | None = None
    actor: dict[str, str] = {}
    allow: tuple[Granted, ...] = ()
    env: dict[str, str] = {}
    copy_: dict[str, str] = Field({}, alias="copy")
    files: dict[str, str] = {}
    knowledge: dict[str, str] = {}
    approvals: dict[str, Decision] = {}
    forbidden_tools: tuple[str, ...] = ()
    # Cites (or their beginnings: `policy/globex`, `runbook/api-keys@v6`) never to be shown to the model.
    forbidden_evidence: tuple[str, ...] = ()
    must_not_contain: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            if name.upper().startswith("AGENTD_"):
                raise ValueError(f"{name}: agentd's own settings cannot be set per case (they are read once)")
            for _, field, _, _ in string.Formatter().parse(value):
                if field is not None and field not in PLACEHOLDERS:
                    raise ValueError(
                        f"{name}: unknown placeholder {{{field}}}; known: {', '.join('{%s}' % p for p in PLACEHOLDERS)}"
                    )
        return v

    @field_validator("files", "knowledge")
    @classmethod
    def _inside(cls, v: dict[str, str]) -> dict[str, str]:
        for path in v:
            _relative(path)
        return v

    @field_validator("copy_")
    @classmethod
    def _destinations(cls, v: dict[str, str]) -> dict[str, str]:
        for dest in v.values():
            _relative(dest)
        return v

    @field_validator("actor")
    @classmethod
    def _actor(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", key):
                raise ValueError(f"{key!r} is not a fact name (lower case letters, digits and _)")
        return v


class Defaults(_Shared):
    pass


class Case(_Shared):
    """One task and what must be true of its run. `fixture` and `expected_outcome` are for people."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
    input: str = Field(min_length=1)
    fixture: str | None = None
    expected_outcome: str | None = None
    required_evidence: tuple[str, ...] = ()
    # Each item a tool that must have run with status ok, or a list of tools of which one must have
    # ([edit_file, write_file]: the change made either way).
    required_tools: tuple[str | tuple[str, ...], ...] = ()
    expect: Expect = Expect()
    # Where the case came from, set by the loader: not part of the format.
    _source: str = PrivateAttr("")
    _folder: Path = PrivateAttr(Path("."))

    @model_validator(mode="after")
    def _consistent(self) -> Case:
        actor_tenant = self.actor.get("tenant")
        if actor_tenant is not None and self.tenant is not None and actor_tenant != self.tenant:
            raise ValueError(f"actor.tenant {actor_tenant!r} and tenant {self.tenant!r} disagree")
        both = set(self.required_tool_names) & set(self.forbidden_tools)
        if both:
            raise ValueError(f"required_tools: {', '.join(sorted(both))} is both required and forbidden")
        self._check_keeps()
        return self

    def _check_keeps(self) -> None:
        """A keep that names nothing of the file would pass by checking nothing: refused here."""
        if self.expect.keep and not self.files:
            raise ValueError("expect.keep: all: the case lays out no files to keep")
        for path, want in self.expect.files.items():
            keep, where = want.keep, f"expect.files.{path}.keep"
            if keep is None:
                continue
            before = self.files.get(path)
            if keep.all and before is None:
                raise ValueError(f"{where}: keeping every line needs the file's text before the run, "
                                 f"and {path} is not among the case's files (list the lines instead)")
            if before is None:
                continue
            had = [line.strip() for line in before.splitlines()]
            for text in keep.except_:
                if not any(text.lower() in line.lower() for line in had):
                    raise ValueError(f"{where}: except: {text!r} is in no line of {path}")
            for line in keep.lines:
                if not line.strip() or line.strip() not in had:
                    raise ValueError(f"{where}: {line!r} is not a line of {path}")

    @property
    def keeps(self) -> dict[str, Keep]:
        """What must survive of each file, by path: its own `keep`, else every line (`expect.keep: all`)."""
        out = {path: want.keep for path, want in self.expect.files.items() if want.keep is not None}
        if self.expect.keep == "all":
            for path in self.files:
                out.setdefault(path, Keep(all=True))
        return out

    @property
    def required_tool_names(self) -> tuple[str, ...]:
        """Every tool `required_tools` names, alternatives included."""
        return tuple(n for item in self.required_tools for n in ((item,) if isinstance(item, str) else item))

    @property
    def task_tenant(self) -> str:
        return self.actor.get("tenant") or self.tenant or "default"

    @property
    def context(self) -> dict[str, str]:
        """The actor's facts other than the tenant: trusted request context for the task."""
        return {k: v for k, v in self.actor.items() if k != "tenant"}

    @property
    def task_profile(self) -> str:
        return self.profile or "workspace"

    @property
    def step_cap(self) -> int:
        return self.expect.max_steps or DEFAULT_MAX_STEPS

    @property
    def copies(self) -> dict[str, str]:
        return self.copy_

    @property
    def source(self) -> str:
        return self._source

    def path(self, relative: str) -> Path:
        """A path the case names outside the run (a plugin, a file to copy), from the case file's folder."""
        return (self._folder / relative).resolve()


class _File(_Strict):
    defaults: Defaults = Defaults()
    cases: list[dict[str, Any]]


def load(paths: list[Path]) -> list[Case]:
    """Every case of every file, in order; raises CaseFileError at the first problem."""
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for path in paths:
        for case in load_file(path):
            if case.name in seen:
                raise CaseFileError(f"{path}: case {case.name!r}: name: also used in {seen[case.name]}")
            seen[case.name] = str(path)
            cases.append(case)
    return cases


def load_file(path: Path) -> list[Case]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CaseFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CaseFileError(f"{path}: cannot be read: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CaseFileError(f"{path}: not valid YAML{where}: {problem}") from None
    if isinstance(data, list):
        data = {"cases": data}
    if not isinstance(data, dict):
        raise CaseFileError(f"{path}: expected a list of cases, or a mapping with defaults: and cases:")
    try:
        shape = _File.model_validate(data)
    except ValidationError as e:
        raise CaseFileError(f"{path}: {_first(e)}") from None
    defaults = shape.defaults.model_dump(by_alias=True, exclude_unset=True)
    if not shape.cases:
        raise CaseFileError(f"{path}: cases: the file holds no case")
    cases: list[Case] = []
    names: set[str] = set()
    for i, raw in enumerate(shape.cases, start=1):
        label = _label(raw, i)
        if not isinstance(raw, dict):
            raise CaseFileError(f"{path}: {label}: a case is a mapping of fields")
        try:
            case = Case.model_validate(merge(defaults, raw))
        except ValidationError as e:
            raise CaseFileError(f"{path}: {label}: {_first(e)}") from None
        if case.name in names:
            raise CaseFileError(f"{path}: {label}: name: two cases are called {case.name!r}")
        names.add(case.name)
        case._source, case._folder = str(path), path.resolve().parent
        _check_paths(path, label, case)
        cases.append(case)
    return cases


def merge(defaults: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """A case over its file's defaults: mappings merge key by key (the case wins), lists are joined
    (a case adds to the file's forbidden tools, never drops one), other values the case replaces."""
    out = dict(defaults)
    for key, value in case.items():
        base = out.get(key)
        if isinstance(base, dict) and isinstance(value, dict):
            out[key] = {**base, **value}
        elif isinstance(base, (list, tuple)) and isinstance(value, (list, tuple)):
            out[key] = list(dict.fromkeys([*base, *value]))
        else:
            out[key] = value
    return out


def _check_paths(path: Path, label: str, case: Case) -> None:
    for field, names in (("plugins", case.plugins), ("skills_dirs", case.skills_dirs), ("copy", case.copies)):
        for name in names:
            target = case.path(name)
            if not target.exists():
                raise CaseFileError(f"{path}: {label}: {field}: {name} does not exist (looked for {target})")


def _relative(path: str, allow_up: int = 0) -> str:
    p = PurePosixPath(path)
    if p.is_absolute() or not path.strip():
        raise ValueError(f"{path!r} must be a relative path")
    depth = 0
    for part in p.parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < -allow_up:
            raise ValueError(f"{path!r} leads out of the run's folder")
    return path


def _regex(pattern: str | None) -> str | None:
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"not a valid regular expression: {e}") from None
    return pattern


def _label(raw: Any, i: int) -> str:
    name = raw.get("name") if isinstance(raw, dict) else None
    return f"case {name!r}" if isinstance(name, str) and name else f"case #{i}"


def _first(e: ValidationError) -> str:
    # A union (a needle is text or a list of texts) reports one error per member; the deepest one
    # names the value that is wrong, the others only that the whole did not fit some member.
    err = max(e.errors(), key=lambda x: len(x["loc"]))
    parts = [str(p) for p in err["loc"] if p not in _UNION_TAGS]
    # A check of the whole case (a keep against its files, tenant against actor) names its field itself.
    loc = ".".join(parts).replace("copy_", "copy")
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "not a field of the case format"
    elif err["type"] == "missing":
        msg = "required"
    elif isinstance(err.get("input"), (bool, date)):
        msg += f" (YAML reads {err['input']!s} as a {type(err['input']).__name__}, not text: quote it)"
    return f"{loc}: {msg}" if loc else msg


_UNION_TAGS = frozenset({"str", "tuple[str, ...]"})
