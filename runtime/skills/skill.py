"""Skill: one Agent Skills folder, its SKILL.md read leniently for use or checked strictly for its author.

The format is the Agent Skills specification (agentskills.io): YAML frontmatter between `---` lines at
the top of SKILL.md, then Markdown instructions. `load` is what agentd runs on: like the spec's advice
to clients, a cosmetic fault is a warning and the skill still loads, and only a skill it cannot show the
model (no description, unreadable YAML) is skipped. `validate` is for whoever writes the skill: every
fault, each an error. Both report through the same checks, so they never disagree on what a fault is.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterator, Literal, Mapping, NamedTuple

import yaml

NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
SPEC_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
SKILL_FILE = "SKILL.md"

# The frontmatter's first line is SKILL.md's line 2, after the opening `---`.
_FIRST_LINE = 2
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# A top-level field whose plain value holds ": " or ends in ":", which YAML takes for a second
# mapping. Other clients accept it, so real skills have it; the spec's client guide advises reading
# it as text.
_COLON_VALUE = re.compile(r"([A-Za-z][\w-]*):[ \t]+([^\s'\"|>\[{&*!%@`#](?:.*?:[ \t].*?|.*?:))[ \t]*")
# libyaml's scanner when present: discovery parses every SKILL.md at startup. The constructor is
# SafeConstructor either way, so no tag can build anything but plain data.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Not only YAMLError: PyYAML's constructor hands values to Python itself (int(), datetime, a dict of
# booleans), so 2024-13-45, `!!bool maybe` or `!!timestamp soon` raise ValueError, KeyError or
# AttributeError, and its pure-Python composer recurses once per level of nesting. Whatever the
# frontmatter makes the parser raise is a fault in the file, to report, not a crash of agentd.
_UNREADABLE = Exception


class Diagnostic(NamedTuple):
    path: Path
    line: int | None
    severity: Literal["error", "warning"]
    message: str

    def __str__(self) -> str:
        where = str(self.path) if self.line is None else f"{self.path}:{self.line}"
        return f"{'warning: ' if self.severity == 'warning' else ''}{where}: {self.message}"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path
    body: str
    content_hash: str
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    allowed_tools: tuple[str, ...] = ()
    unknown_fields: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    warnings: tuple[Diagnostic, ...] = ()

    def files(self) -> list[str]:
        """The skill's other files, as sorted POSIX paths relative to its folder.

        Never leads out of the folder: a symlink is listed only when it resolves to a file inside it.
        A symlinked folder is not entered, since a link inside would list its files twice and a link
        to an ancestor would loop; the files it points at inside the skill are listed where they are.
        """
        root = self.folder
        found: list[str] = []
        pending = [(root, "")]
        while pending:
            directory, prefix = pending.pop()
            try:
                with os.scandir(directory) as listing:
                    children = list(listing)
            except OSError:
                continue
            for entry in children:
                if entry.name.startswith(".") or entry.name == "__pycache__":
                    continue
                relative = prefix + entry.name
                if relative == SKILL_FILE:
                    continue
                if entry.is_symlink():
                    target = Path(os.path.realpath(entry.path))
                    if target.is_relative_to(root) and os.path.isfile(target):
                        found.append(relative)
                elif entry.is_dir(follow_symlinks=False):
                    pending.append((Path(entry.path), relative + "/"))
                elif entry.is_file(follow_symlinks=False):
                    found.append(relative)
        return sorted(found)


def load(folder: Path) -> tuple[Skill | None, list[Diagnostic]]:
    """Lenient, as the spec advises clients to be.

    Returns the skill and its warnings, or None and at least one error saying why it was skipped.
    """
    folder = Path(folder)
    parsed = _read(folder, lenient=True)
    if isinstance(parsed, Diagnostic):
        return None, [parsed]
    own_name = _folder_name(folder)
    faults = list(_faults(parsed, own_name))
    diagnostics = [
        *parsed.repairs,
        *(
            Diagnostic(parsed.path, f.line, "error", f.message)
            if f.fatal
            else Diagnostic(parsed.path, f.line, "warning", f"{f.message}; {f.then}" if f.then else f.message)
            for f in faults
        ),
        *_unknown(parsed),
    ]
    if any(f.fatal for f in faults):
        return None, diagnostics
    fields = parsed.fields
    name = _text(fields.get("name"))
    compatibility = _text(fields.get("compatibility"))
    unknown = {k: v for k, v in fields.items() if k not in SPEC_FIELDS}
    skill = Skill(
        name=name if name and name.strip() else own_name,
        description=_text(fields["description"]),
        folder=folder.resolve(),
        body=parsed.body,
        content_hash=parsed.content_hash,
        license=_text(fields.get("license")),
        compatibility=compatibility if compatibility and compatibility.strip() else None,
        metadata=MappingProxyType(_lenient_metadata(fields.get("metadata"))),
        allowed_tools=_lenient_tools(fields.get("allowed-tools")),
        unknown_fields=MappingProxyType(unknown),
        warnings=tuple(diagnostics),
    )
    return skill, diagnostics


def validate(folder: Path) -> list[Diagnostic]:
    """Strict, for authors: every violation, each an error; unknown fields are warnings."""
    folder = Path(folder)
    parsed = _read(folder, lenient=False)
    if isinstance(parsed, Diagnostic):
        return [parsed]
    errors = [Diagnostic(parsed.path, f.line, "error", f.message) for f in _faults(parsed, _folder_name(folder))]
    return [*errors, *_unknown(parsed)]


class _Parsed(NamedTuple):
    path: Path
    fields: dict[str, Any]
    # ("name",) or ("metadata", "author") -> the SKILL.md line it is written on.
    lines: dict[tuple[str, ...], int]
    repeated: tuple[tuple[str, tuple[int, ...]], ...]
    body: str
    content_hash: str
    repairs: tuple[Diagnostic, ...]


class _Fault(NamedTuple):
    line: int | None
    message: str
    fatal: bool = False  # load skips the skill; otherwise it loads, and this is a warning
    then: str = ""  # what load does about it, said in the warning


def _read(folder: Path, lenient: bool) -> _Parsed | Diagnostic:
    path = folder / SKILL_FILE
    # os.path, not Path: its checks answer False where Path's raise (a folder no one may enter).
    if not os.path.isdir(folder):
        return Diagnostic(folder, None, "error", "not a folder" if os.path.lexists(folder) else "no such folder")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Diagnostic(folder, None, "error", f"no {SKILL_FILE} in this folder")
    except OSError as e:
        return Diagnostic(path, None, "error", f"{SKILL_FILE} cannot be read: {e.strerror or e}")
    try:
        # Not utf-8-sig: its error positions skip the BOM, and the line of a bad byte is wanted.
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        return Diagnostic(path, line, "error", f"{SKILL_FILE} is not UTF-8 text (byte 0x{raw[e.start]:02x})")
    lines = _LINE_BREAK.split(text)
    if lines[0].rstrip() != "---":
        return Diagnostic(path, 1, "error", f"{SKILL_FILE} has no frontmatter: it must begin with a '---' line")
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if close is None:
        return Diagnostic(path, 1, "error", "the frontmatter opened on line 1 is never closed by a '---' line")
    # The newline before the closing `---` is the frontmatter's own: `description: >` keeps it.
    source = "".join(line + "\n" for line in lines[1:close])
    repairs: tuple[Diagnostic, ...] = ()
    try:
        node, data = _compose(source)
    except _UNREADABLE as e:
        failure = _unreadable(path, source, e)
        quoted, repaired_lines = _quote_colon_values(source) if lenient else (source, [])
        if not repaired_lines:
            return failure
        try:
            node, data = _compose(quoted)
        except _UNREADABLE:
            return failure
        said = "a plain value holding ': ' is not valid YAML; read as text (quote it)"
        repairs = tuple(Diagnostic(path, _FIRST_LINE + i, "warning", said) for i in repaired_lines)
    if data is None:
        return Diagnostic(path, 1, "error", "the frontmatter is empty: 'name' and 'description' are required")
    if not isinstance(data, dict):
        return Diagnostic(path, 1, "error", f"the frontmatter must be a mapping of fields, not {_kind(data)}")
    lines_of, repeated = _field_lines(node)
    body = lines[close + 1 :]
    start, end = 0, len(body)
    while start < end and not body[start].strip():
        start += 1
    while end > start and not body[end - 1].strip():
        end -= 1
    return _Parsed(
        path=path,
        fields={_key(k): v for k, v in data.items()},
        lines=lines_of,
        repeated=repeated,
        body="\n".join(body[start:end]),
        content_hash=hashlib.sha256(raw).hexdigest(),
        repairs=repairs,
    )


def _compose(source: str) -> tuple[yaml.Node | None, Any]:
    """yaml.safe_load's own two steps, keeping the node tree for the line each field is on."""
    loader = _Loader(source)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


def _unreadable(path: Path, source: str, e: Exception) -> Diagnostic:
    if isinstance(e, yaml.MarkedYAMLError) and (e.problem_mark or e.context_mark):
        mark = e.problem_mark or e.context_mark
        what = e.problem or e.context or "syntax error"
        message = f"the frontmatter is not valid YAML: {what}, column {mark.column + 1}"
        if e.problem and e.context:
            # "while parsing a flow sequence": where the unfinished thing began is often the real fault.
            began = f" on line {_FIRST_LINE + e.context_mark.line}" if e.context_mark else ""
            message += f" ({e.context}{began})"
        return Diagnostic(path, _FIRST_LINE + mark.line, "error", message)
    if isinstance(e, yaml.reader.ReaderError):
        line = _FIRST_LINE + source[: e.position].count("\n")
        message = f"the frontmatter holds a character YAML does not allow (#x{e.character:04x})"
        return Diagnostic(path, line, "error", message)
    if isinstance(e, RecursionError):
        return Diagnostic(path, None, "error", "the frontmatter nests too deeply to read")
    return Diagnostic(path, None, "error", f"the frontmatter is not valid YAML: a value cannot be read ({e!r})")


def _quote_colon_values(source: str) -> tuple[str, list[int]]:
    """The frontmatter with each top-level `key: plain value: more` turned into a quoted string."""
    lines = source.split("\n")
    changed = []
    for i, line in enumerate(lines):
        m = _COLON_VALUE.fullmatch(line)
        if m:
            lines[i] = f"{m.group(1)}: {json.dumps(m.group(2), ensure_ascii=False)}"
            changed.append(i)
    return "\n".join(lines), changed


def _field_lines(node: yaml.Node | None) -> tuple[dict[tuple[str, ...], int], tuple[tuple[str, tuple[int, ...]], ...]]:
    lines: dict[tuple[str, ...], int] = {}
    seen: dict[str, list[int]] = {}
    if not isinstance(node, yaml.MappingNode):
        return lines, ()
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        line = _FIRST_LINE + key.start_mark.line
        # YAML keeps the last of a repeated key, so that is the line to point at.
        lines[(key.value,)] = line
        seen.setdefault(key.value, []).append(line)
        if key.value == "metadata" and isinstance(value, yaml.MappingNode):
            for sub, _ in value.value:
                if isinstance(sub, yaml.ScalarNode):
                    lines[("metadata", sub.value)] = _FIRST_LINE + sub.start_mark.line
    return lines, tuple((k, tuple(v)) for k, v in seen.items() if len(v) > 1)


def _faults(p: _Parsed, own_name: str) -> Iterator[_Fault]:
    """Every way the frontmatter breaks the spec, in field order; unknown fields are not faults."""
    fields = p.fields

    def at(*key: str) -> int | None:
        return p.lines.get(key)

    for key, lines in p.repeated:
        message = f"field {_quoted(key)} is given {len(lines)} times (lines {', '.join(map(str, lines))})"
        yield _Fault(lines[-1], message, then="the last one counts")

    faults, name = _required_text(fields, "name", at("name"), then=f"using the folder's name {own_name!r}")
    yield from faults
    if name is not None:
        for problem in _name_problems(name, own_name):
            yield _Fault(at("name"), problem)

    faults, description = _required_text(fields, "description", at("description"), fatal=True)
    yield from faults
    if description is not None and len(description) > DESCRIPTION_MAX:
        yield _Fault(
            at("description"), f"'description' is {len(description)} characters, over the limit of {DESCRIPTION_MAX}"
        )

    if "license" in fields:
        yield from _text_type("license", fields["license"], at("license"))

    if "compatibility" in fields:
        value, line = fields["compatibility"], at("compatibility")
        yield from _text_type("compatibility", value, line)
        text = _text(value)
        if text is not None and not text.strip():
            yield _Fault(line, "'compatibility' is empty; leave it out instead", then="ignored")
        elif text is not None and len(text) > COMPATIBILITY_MAX:
            yield _Fault(line, f"'compatibility' is {len(text)} characters, over the limit of {COMPATIBILITY_MAX}")

    if "metadata" in fields:
        value, line = fields["metadata"], at("metadata")
        if not isinstance(value, dict):
            yield _Fault(line, f"'metadata' must be a mapping of text to text, not {_kind(value)}", then="ignored")
        else:
            for k, v in value.items():
                key = _key(k)
                where = at("metadata", key) or line
                if not isinstance(k, str):
                    message = f"metadata key {_quoted(key)} must be text, not {_kind(k)}"
                    yield _Fault(where, message, then="read as text (quote it)")
                if not isinstance(v, str):
                    then = "read as text (quote it)" if v is None or _text(v) is not None else "ignored"
                    yield _Fault(where, f"metadata value of {_quoted(key)} must be text, not {_kind(v)}", then=then)

    if "allowed-tools" in fields:
        value, line = fields["allowed-tools"], at("allowed-tools")
        if isinstance(value, list):
            message = "'allowed-tools' must be one line of tool names separated by spaces, not a list"
            yield _Fault(line, message, then="read the list's items")
        elif not isinstance(value, str):
            yield _Fault(line, f"'allowed-tools' must be text, not {_kind(value)}", then="ignored")


def _required_text(
    fields: dict[str, Any], key: str, line: int | None, **consequence: Any
) -> tuple[list[_Fault], str | None]:
    """The faults of a field the spec requires as text, and its text when there is any to check further.

    `consequence` (`fatal=True`, or `then=...`) says what load does when the field is unusable.
    """
    if key not in fields:
        return [_Fault(None, f"the required field {key!r} is missing", **consequence)], None
    value = fields[key]
    text = _text(value)
    if value is not None and text is None:
        return [_Fault(line, f"{key!r} must be text, not {_kind(value)}", **consequence)], None
    if not text or not text.strip():
        return [_Fault(line, f"{key!r} is empty", **consequence)], None
    if not isinstance(value, str):
        return [_Fault(line, f"{key!r} must be text, not {_kind(value)}", then="read as text (quote it)")], text
    return [], text


def _text_type(key: str, value: Any, line: int | None) -> Iterator[_Fault]:
    if value is None:
        yield _Fault(line, f"{key!r} is empty; leave it out instead", then="ignored")
    elif not isinstance(value, str):
        then = "read as text (quote it)" if _text(value) is not None else "ignored"
        yield _Fault(line, f"{key!r} must be text, not {_kind(value)}", then=then)


def _name_problems(name: str, own_name: str) -> Iterator[str]:
    # NFKC first, as the reference validator does: a name typed with compatibility forms (a
    # full-width letter, a ligature) is the same name once normalised.
    normal = unicodedata.normalize("NFKC", name)
    if len(normal) > NAME_MAX:
        yield f"name is {len(normal)} characters, over the limit of {NAME_MAX}"
    # The spec allows unicode lowercase letters and digits: "données" is a name, "Données" is not.
    if any(c.lower() != c for c in normal):
        yield f"name {_quoted(name)} must be lowercase"
    bad = sorted({c for c in normal if not (c == "-" or c.isalnum())})
    if bad:
        shown = ", ".join(repr(c) for c in bad[:5])
        yield f"name {_quoted(name)} may only hold letters, digits and hyphens, not {shown}"
    if normal.startswith("-") or normal.endswith("-"):
        yield f"name {_quoted(name)} must not start or end with a hyphen"
    if "--" in normal:
        yield f"name {_quoted(name)} must not hold consecutive hyphens"
    if normal != unicodedata.normalize("NFKC", own_name):
        yield f"name {_quoted(name)} does not match its folder's name {own_name!r}"


def _unknown(p: _Parsed) -> Iterator[Diagnostic]:
    for key in p.fields:
        if key not in SPEC_FIELDS:
            message = f"unknown field {_quoted(key)}: not in the Agent Skills specification, kept unused"
            yield Diagnostic(p.path, p.lines.get((key,)), "warning", message)


def _lenient_metadata(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    out = {}
    for k, v in value.items():
        text = "" if v is None else _text(v)
        if text is not None:
            out[_key(k)] = text
    return out


def _lenient_tools(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list):
        # Each item is one tool, spaces and all: the list says where each one ends.
        return tuple(t.strip() for t in map(_text, value) if t and t.strip())
    return ()


def _text(value: Any) -> str | None:
    """A scalar as the text its author most likely meant; None for nothing, lists and mappings."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, (int, float)):
        return str(value)
    return None


def _key(key: Any) -> str:
    text = _text(key)
    return text if text is not None else ("null" if key is None else repr(key))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, datetime.date):
        return "a date"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _quoted(text: str) -> str:
    """A value for a message, cut short: a 5,000-character name need not be printed five times."""
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _folder_name(folder: Path) -> str:
    # Lexical, not resolved: a skill linked into the skills folder is known by the link's name.
    return Path(os.path.abspath(folder)).name
