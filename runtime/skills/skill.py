"""Skill: one Agent Skills folder, its SKILL.md read leniently for use or checked strictly for its author.

The format is the Agent Skills specification (agentskills.io): YAML frontmatter between `---` lines at
the top of SKILL.md, then Markdown instructions. `load` is what agentd runs on: like the spec's advice
to clients, a cosmetic fault is a warning and the skill still loads, and only a skill it cannot show the
model (no description, unreadable YAML) is skipped. `validate` is for whoever writes the skill: every
fault, each an error. Both report through the same checks, so they never disagree on what a fault is.

A skill folder comes from anywhere, so both read SKILL.md only if it is a regular file inside its
folder and under SKILL_MAX_BYTES, and refuse a frontmatter over FRONTMATTER_MAX characters or one
whose YAML aliases would expand past EXPANDED_MAX, each with its file and line.
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

from runtime.skills.files import UnreadableFile, read_regular, resolve_inside
from store.errors import AgentdError

NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
SPEC_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
SKILL_FILE = "SKILL.md"
# What agentd reads of a SKILL.md at most: its body enters a task whole, so a megabyte is already more
# than any model's window; the limit is there so a huge or endless file cannot exhaust memory.
SKILL_MAX_BYTES = 1 << 20
# The frontmatter holds a name, a description of at most 1,024 characters and a few short fields.
FRONTMATTER_MAX = 64 * 1024
# What its values may grow to once YAML aliases are expanded: libyaml shares an aliased node rather
# than copying it, so eleven lines can stand for 9**9 strings, which `skills list --json` then wrote
# out until the kernel killed it. Counted on the node tree, before anything is built from it.
EXPANDED_MAX = 4 * FRONTMATTER_MAX

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
    """Strict, for authors: every violation, each an error, unknown fields included."""
    folder = Path(folder)
    parsed = _read(folder, lenient=False)
    if isinstance(parsed, Diagnostic):
        return [parsed]
    errors = [Diagnostic(parsed.path, f.line, "error", f.message) for f in _faults(parsed, _folder_name(folder))]
    # As the reference validator (skills-ref) does: a field the spec does not define fails the check.
    return [*errors, *_unknown(parsed, strict=True)]


class _Parsed(NamedTuple):
    path: Path
    fields: dict[str, Any]
    # ("name",) or ("metadata", "author") -> the SKILL.md line it is written on.
    lines: dict[tuple[str, ...], int]
    # ("name",) or ("metadata", "author") -> every line it is given on, when more than one.
    repeated: tuple[tuple[tuple[str, ...], tuple[int, ...]], ...]
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
    raw = _skill_md(folder)
    if isinstance(raw, Diagnostic):
        return raw
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
    if len(source) > FRONTMATTER_MAX:
        message = (
            f"the frontmatter is {len(source):,} characters, over the limit of {FRONTMATTER_MAX:,}; "
            "keep long text in the body or in a file the body points to"
        )
        return Diagnostic(path, 1, "error", message)
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
        source = quoted  # one line for one line, so its marks still name the author's lines
        said = "a plain value holding ': ' is not valid YAML; read as text (quote it)"
        repairs = tuple(Diagnostic(path, _FIRST_LINE + i, "warning", said) for i in repaired_lines)
    if data is None:
        return Diagnostic(path, 1, "error", "the frontmatter is empty: 'name' and 'description' are required")
    if not isinstance(data, dict):
        return Diagnostic(path, 1, "error", f"the frontmatter must be a mapping of fields, not {_kind(data)}")
    lines_of, repeated = _field_lines(node, source)
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


def _skill_md(folder: Path) -> bytes | Diagnostic:
    """SKILL.md's bytes, read only if it is a regular file inside the folder and within the size limit."""
    path = folder / SKILL_FILE
    # os.path, not Path: its checks answer False where Path's raise (a folder no one may enter).
    if not os.path.isdir(folder):
        return Diagnostic(folder, None, "error", "not a folder" if os.path.lexists(folder) else "no such folder")
    if not os.path.lexists(path):
        other = _misnamed(folder)
        if other is not None:
            message = f"the file is named {other!r}; agentd reads only '{SKILL_FILE}', in capitals: rename it"
            return Diagnostic(folder / other, None, "error", message)
        return Diagnostic(folder, None, "error", f"no {SKILL_FILE} in this folder")
    try:
        return read_regular(resolve_inside(path, folder), SKILL_MAX_BYTES)
    except UnreadableFile as e:
        return Diagnostic(path, None, "error", f"{SKILL_FILE} cannot be read: {e.reason}")


def _misnamed(folder: Path) -> str | None:
    """The name of a file in `folder` that is SKILL.md in other letters (skill.md, Skill.md), if any."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    return next((n for n in names if n != SKILL_FILE and n.lower() == SKILL_FILE.lower()), None)


class _Unbuildable(AgentdError):
    """A scalar YAML can parse but not build (2024-13-45, `!!int 0b2`), with the node it is in."""

    def __init__(self, node: yaml.ScalarNode, cause: Exception) -> None:
        self.node = node
        self.cause = cause
        super().__init__(node.value)


class _Overgrown(AgentdError):
    """A field whose value, with its aliases expanded, is over EXPANDED_MAX or never ends."""

    def __init__(self, key: yaml.Node, endless: bool) -> None:
        self.key = key
        self.endless = endless
        super().__init__(getattr(key, "value", ""))


def _compose(source: str) -> tuple[yaml.Node | None, Any]:
    """yaml.safe_load's own two steps, keeping the node tree for the line each field is on, and
    refusing a tree that aliases would expand past EXPANDED_MAX before anything is built from it."""
    loader = _Loader(source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_expansion(node)
        try:
            return node, loader.construct_document(node)
        except (yaml.YAMLError, RecursionError):
            raise
        except Exception as e:  # noqa: BLE001  PyYAML hands values to int(), datetime(), base64 and lets them raise
            raise _first_unbuildable(node, e) from e
    finally:
        loader.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: yaml.Node) -> None:
    """Raise _Overgrown naming the top-level field whose value, expanded, is too large or refers to itself.

    A node's size is its characters (a scalar) or one plus its children's sizes, counted once per node
    and summed per reference, so the count costs what the tree costs, not what its expansion would.
    """
    sizes: dict[int, int] = {}
    total = 0
    fields = [(k, (k, v)) for k, v in root.value] if isinstance(root, yaml.MappingNode) else [(root, (root,))]
    for key, parts in fields:
        for part in parts:
            try:
                total += _size(part, sizes)
            except _Overgrown as e:
                raise _Overgrown(key, e.endless) from None
            if total > EXPANDED_MAX:
                raise _Overgrown(key, endless=False)


def _size(root: yaml.Node, sizes: dict[int, int]) -> int:
    expanding: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            expanding.discard(key)
            own = len(node.value) if isinstance(node, yaml.ScalarNode) else sum(sizes[id(c)] for c in _children(node))
            sizes[key] = 1 + own
            if sizes[key] > EXPANDED_MAX:
                raise _Overgrown(node, endless=False)
        elif key in expanding:
            # An alias inside the node it names (`&a [*a]`): its expansion never ends.
            raise _Overgrown(node, endless=True)
        elif key not in sizes:
            expanding.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in _children(node))
    return sizes[id(root)]


def _first_unbuildable(root: yaml.Node, cause: Exception) -> Exception:
    """The first scalar, in document order, that a fresh loader cannot build either; else `cause`."""
    probe = _Loader("")
    try:
        pending, seen = [root], set()
        while pending:
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.ScalarNode):
                try:
                    probe.construct_object(node, deep=True)
                except (yaml.YAMLError, RecursionError):
                    raise
                except Exception as e:  # noqa: BLE001  as in _compose
                    return _Unbuildable(node, e)
            pending.extend(reversed(_children(node)))
    finally:
        probe.dispose()
    return cause


def _line(source: str, mark: Any) -> int:
    # YAML counts NEL, U+2028 and U+2029 as line breaks; editors and `grep -n` do not. The character
    # index is the same for both loaders, so lines are counted from it, in newlines.
    return _FIRST_LINE + source.count("\n", 0, mark.index)


def _column(source: str, mark: Any) -> int:
    return mark.index - (source.rfind("\n", 0, mark.index) + 1) + 1


# What a value tagged (or resolved) as each YAML type must be, said for a skill's author.
_TYPE_WORDS = {
    "timestamp": "a date",
    "bool": "true or false",
    "int": "a whole number",
    "float": "a number",
    "binary": "base64 data",
}


def _unbuildable_message(source: str, e: _Unbuildable) -> str:
    kind = e.node.tag.rsplit(":", 1)[-1]
    words = _TYPE_WORDS.get(kind, f"a {kind}")
    shown = _quoted(e.node.value)
    if source.startswith("!", e.node.start_mark.index):
        return f"{shown} is tagged !!{kind} but is not {words}; remove the tag, or quote the value to keep it as text"
    # Only dates resolve implicitly and can still fail; datetime says which part is wrong, in words.
    why = f" ({e.cause})" if kind == "timestamp" and type(e.cause) is ValueError else ""
    return f"{shown} looks like {words} but is not one{why}; quote it to keep it as text"


def _unreadable(path: Path, source: str, e: Exception) -> Diagnostic:
    if isinstance(e, _Unbuildable):
        return Diagnostic(path, _line(source, e.node.start_mark), "error", _unbuildable_message(source, e))
    if isinstance(e, _Overgrown):
        field = f"field {_quoted(e.key.value)}" if isinstance(e.key, yaml.ScalarNode) else "the frontmatter"
        if e.endless:
            message = f"{field} holds a YAML alias that refers to itself, which would never end"
        else:
            message = (
                f"{field} expands through YAML aliases (*name) to more than {EXPANDED_MAX:,} characters, "
                "far more than a frontmatter needs; write its values out instead"
            )
        return Diagnostic(path, _line(source, e.key.start_mark), "error", message)
    if isinstance(e, yaml.constructor.ConstructorError) and e.problem_mark and e.problem and (
        e.problem.startswith("could not determine a constructor")
    ):
        tag = e.problem.rsplit(" ", 1)[-1].strip("'").replace("tag:yaml.org,2002:", "!!")
        message = f"the tag {tag} asks for more than plain YAML data, which is all a frontmatter may hold; remove it"
        return Diagnostic(path, _line(source, e.problem_mark), "error", message)
    if isinstance(e, yaml.MarkedYAMLError) and (e.problem_mark or e.context_mark):
        mark = e.problem_mark or e.context_mark
        what = e.problem or e.context or "syntax error"
        message = f"the frontmatter is not valid YAML: {what}, column {_column(source, mark)}"
        if e.problem and e.context:
            # "while parsing a flow sequence": where the unfinished thing began is often the real fault.
            began = f" on line {_line(source, e.context_mark)}" if e.context_mark else ""
            message += f" ({e.context}{began})"
        return Diagnostic(path, _line(source, mark), "error", message)
    if isinstance(e, yaml.reader.ReaderError):
        line = _FIRST_LINE + source[: e.position].count("\n")
        message = f"the frontmatter holds a character YAML does not allow (#x{e.character:04x})"
        return Diagnostic(path, line, "error", message)
    if isinstance(e, RecursionError):
        return Diagnostic(path, None, "error", "the frontmatter nests too deeply to read")
    return Diagnostic(path, None, "error", f"the frontmatter cannot be read as YAML: {e}")


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


def _field_lines(
    node: yaml.Node | None, source: str
) -> tuple[dict[tuple[str, ...], int], tuple[tuple[tuple[str, ...], tuple[int, ...]], ...]]:
    """The line of each field and metadata key, and the keys given more than once with all their lines."""
    lines: dict[tuple[str, ...], int] = {}
    seen: dict[tuple[str, ...], list[int]] = {}
    if not isinstance(node, yaml.MappingNode):
        return lines, ()
    pending = [((), node)]
    while pending:
        prefix, mapping = pending.pop(0)
        for key, value in mapping.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            where = (*prefix, key.value)
            # YAML keeps the last of a repeated key, so that is the line to point at.
            lines[where] = _line(source, key.start_mark)
            seen.setdefault(where, []).append(lines[where])
            if where == ("metadata",) and isinstance(value, yaml.MappingNode):
                pending.append((where, value))
    return lines, tuple((k, tuple(v)) for k, v in seen.items() if len(v) > 1)


def _faults(p: _Parsed, own_name: str) -> Iterator[_Fault]:
    """Every way the frontmatter breaks the spec, in field order; unknown fields are not faults."""
    fields = p.fields

    def at(*key: str) -> int | None:
        return p.lines.get(key)

    for where, lines in p.repeated:
        what = f"field {_quoted(where[0])}" if len(where) == 1 else f"metadata key {_quoted(where[-1])}"
        message = f"{what} is given {len(lines)} times (lines {', '.join(map(str, lines))})"
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


def _unknown(p: _Parsed, strict: bool = False) -> Iterator[Diagnostic]:
    for key in p.fields:
        if key not in SPEC_FIELDS:
            if strict:
                message = (
                    f"unknown field {_quoted(key)}: not in the Agent Skills specification; "
                    "put it under 'metadata' (as text) or leave it out"
                )
                yield Diagnostic(p.path, p.lines.get((key,)), "error", message)
            else:
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
    if isinstance(value, bytes):
        return "binary data (!!binary)"
    if isinstance(value, (set, frozenset)):
        return "a set (!!set)"
    return "a value of another kind"


def _quoted(text: str) -> str:
    """A value for a message, cut short: a 5,000-character name need not be printed five times."""
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _folder_name(folder: Path) -> str:
    # Lexical, not resolved: a skill linked into the skills folder is known by the link's name.
    return Path(os.path.abspath(folder)).name
