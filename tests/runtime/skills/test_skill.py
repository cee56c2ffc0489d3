"""One skill folder: SKILL.md as the Agent Skills spec defines it, loaded leniently and validated strictly."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from runtime.skills import skill
from runtime.skills.skill import (
    COMPATIBILITY_MAX,
    DESCRIPTION_MAX,
    NAME_MAX,
    Diagnostic,
    Skill,
    load,
    validate,
)
from tests.helpers.skill import DESCRIPTION, md, write


def assert_says(diagnostics: list[Diagnostic], fragments: tuple[str, ...]) -> None:
    """Each fragment is in its own diagnostic's message, and no diagnostic is left over."""
    left = list(diagnostics)
    for fragment in fragments:
        match = next((d for d in left if fragment in d.message), None)
        assert match is not None, f"no diagnostic says {fragment!r} in {[str(d) for d in left]}"
        left.remove(match)
    assert not left, f"unexpected: {[str(d) for d in left]}"


class Case(NamedTuple):
    folder: str
    text: str | bytes
    loads: bool
    warns: tuple[str, ...] = ()  # load's warnings, one fragment each
    errors: tuple[str, ...] = ()  # validate's errors (and load's error, when it skips), one fragment each
    notes: tuple[str, ...] = ()  # validate's warnings
    line: int | None = None  # the SKILL.md line of the first error


LONG_NAME = "a" * NAME_MAX
TOO_LONG_NAME = "a" * (NAME_MAX + 1)

def named(name: str, *fields: str, body: str = "Read the PDF, then answer.") -> str:
    return md(f"name: {name}", DESCRIPTION, *fields, body=body)


def pdf(*fields: str) -> str:
    return md("name: pdf", *fields)


CASES = {
    "valid-minimal": Case("pdf-processing", named("pdf-processing"), True),
    "valid-digits-and-hyphens": Case("v2-api-3", named("v2-api-3"), True),
    "valid-one-character": Case("a", named("a"), True),
    "valid-64-characters": Case(LONG_NAME, named(LONG_NAME), True),
    "valid-unicode-name-and-description": Case(
        "données", md("name: données", "description: Analyse des données — 日本語 ✓, quand on le demande."), True
    ),
    "valid-all-spec-fields": Case(
        "pdf",
        named(
            "pdf",
            "license: Apache-2.0",
            "compatibility: Requires poppler-utils",
            "metadata:",
            "  author: example-org",
            '  version: "1.0"',
            "allowed-tools: Bash(pdftotext:*) Read",
        ),
        True,
    ),
    "valid-quoted-strings-with-colons": Case(
        "pdf", pdf('description: "Use when: the user asks about PDFs"', "license: 'see: LICENSE.txt'"), True
    ),
    "valid-block-scalar-literal": Case("pdf", pdf("description: |-", "  Line one.", "  Line two."), True),
    "valid-block-scalar-folded": Case("pdf", pdf("description: >", "  Folded", "  text."), True),
    "valid-description-1024": Case("pdf", pdf("description: " + "d" * DESCRIPTION_MAX), True),
    "valid-compatibility-500": Case("pdf", named("pdf", "compatibility: " + "c" * COMPATIBILITY_MAX), True),
    "valid-crlf-line-endings": Case("pdf", named("pdf", body="# PDF\n\nSteps.").replace("\n", "\r\n"), True),
    "valid-utf8-bom": Case("pdf", "\ufeff" + named("pdf"), True),
    "valid-100kb-body": Case("pdf", md("name: pdf", DESCRIPTION, body="A line of instructions.\n" * 4400), True),
    "name-uppercase": Case("PDF-Tools", named("PDF-Tools"), True, ("lowercase",), ("lowercase",), line=2),
    "name-leading-hyphen": Case("-pdf", named("-pdf"), True, ("hyphen",), ("hyphen",), line=2),
    "name-trailing-hyphen": Case("pdf-", named("pdf-"), True, ("hyphen",), ("hyphen",), line=2),
    "name-double-hyphen": Case("pdf--tools", named("pdf--tools"), True, ("consecutive",), ("consecutive",), line=2),
    "name-65-characters": Case(TOO_LONG_NAME, named(TOO_LONG_NAME), True, ("65 characters",), ("65 char",), line=2),
    "name-underscore": Case("pdf_tools", named("pdf_tools"), True, ("letters, digits and hyphens",), ("'_'",), line=2),
    "name-space": Case("pdf tools", named('"pdf tools"'), True, ("' '",), ("' '",), line=2),
    "name-not-its-folder": Case("other", named("pdf"), True, ("folder's name 'other'",), ("does not match",), line=2),
    "name-missing": Case("pdf", md(DESCRIPTION), True, ("using the folder's name 'pdf'",), ("'name' is missing",)),
    "name-a-number": Case("2024", named("2024"), True, ("read as text",), ("must be text",), line=2),
    "description-1025": Case("pdf", pdf("description: " + "d" * 1025), True, ("1025 characters",), ("1025",), line=3),
    "description-missing": Case("pdf", pdf(), False, errors=("'description' is missing",)),
    "description-empty": Case("pdf", pdf('description: ""'), False, errors=("'description' is empty",), line=3),
    "description-null": Case("pdf", pdf("description:"), False, errors=("'description' is empty",), line=3),
    "description-a-list": Case("pdf", pdf("description: [a, b]"), False, errors=("not a list",), line=3),
    "compatibility-501": Case(
        "pdf", named("pdf", "compatibility: " + "c" * 501), True, ("501 characters",), ("501 characters",), line=4
    ),
    "allowed-tools-flow-list": Case(
        "pdf", named("pdf", 'allowed-tools: [Read, "Bash(git:*)"]'), True, ("not a list",), ("not a list",), line=4
    ),
    "unknown-fields-version-and-user-invocable": Case(
        "pdf",
        named("pdf", "version: 1.0", "user-invocable: true"),
        True,
        warns=("unknown field 'version'", "unknown field 'user-invocable'"),
        errors=("unknown field 'version'", "unknown field 'user-invocable'"),
        line=4,
    ),
    "metadata-non-string-values": Case(
        "pdf",
        named("pdf", "metadata:", "  version: 1.0", "  beta: true", "  author: me"),
        True,
        warns=("'version' must be text", "'beta' must be text"),
        errors=("'version' must be text", "'beta' must be text"),
        line=5,
    ),
    "metadata-a-list": Case("pdf", named("pdf", "metadata: [a, b]"), True, ("mapping",), ("mapping",), line=4),
    "license-a-mapping": Case(
        "pdf", named("pdf", "license: {spdx: MIT}"), True, ("'license' must be text",), ("'license'",), line=4
    ),
    "field-given-twice": Case("pdf", named("pdf", DESCRIPTION), True, ("2 times",), ("2 times",), line=4),
    "unquoted-colon-in-a-value": Case(
        "pdf", pdf("description: Use when: the user asks about PDFs"), True, ("quote it",), ("not valid YAML",), line=3
    ),
    "yaml-syntax-error": Case(
        "pdf", pdf("license: MIT", "description: 'it's broken'"), False, errors=("not valid YAML",), line=4
    ),
    "yaml-undefined-alias": Case("pdf", named("pdf", "license: *nope"), False, errors=("alias",), line=4),
    "no-frontmatter": Case("pdf", "# PDF\n\nJust Markdown.\n", False, errors=("no frontmatter",), line=1),
    "frontmatter-not-at-the-top": Case("pdf", "\n" + named("pdf"), False, errors=("no frontmatter",), line=1),
    "unclosed-frontmatter": Case(
        "pdf", f"---\nname: pdf\n{DESCRIPTION}\n# PDF\n", False, errors=("never closed",), line=1
    ),
    "frontmatter-a-list": Case("pdf", md("- name: pdf", "- " + DESCRIPTION), False, errors=("mapping",), line=1),
    "frontmatter-empty": Case("pdf", md(), False, errors=("empty",), line=1),
    "not-utf8": Case("pdf", b"---\nname: pdf\ndescription: caf\xe9\n---\nbody\n", False, errors=("UTF-8",), line=3),
    "impossible-date": Case(
        "pdf", named("pdf", "license: 2024-13-45"), False, errors=("looks like a date but is not one",), line=4
    ),
    "explicit-tag-yaml-cannot-build": Case(
        "pdf", named("pdf", "license: !!timestamp soon"), False, errors=("tagged !!timestamp",), line=4
    ),
    "python-tag": Case(
        "pdf", named("pdf", "license: !!python/object/apply:os.system [ls]"), False, errors=("plain YAML",), line=4
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_frontmatter_conformance(tmp_path: Path, case: Case) -> None:
    folder = write(tmp_path, case.folder, case.text)

    loaded, diagnostics = load(folder)
    warnings = [d for d in diagnostics if d.severity == "warning"]
    errors = [d for d in diagnostics if d.severity == "error"]
    if case.loads:
        assert isinstance(loaded, Skill)
        assert not errors
        assert_says(warnings, case.warns)
        assert loaded.warnings == tuple(warnings)
    else:
        assert loaded is None
        assert_says(errors, case.errors[:1])
        assert errors[0].path == folder / "SKILL.md"
        assert errors[0].line == case.line

    checked = validate(folder)
    assert_says([d for d in checked if d.severity == "error"], case.errors)
    assert_says([d for d in checked if d.severity == "warning"], case.notes)
    if case.errors:
        assert checked[0].line == case.line


def write_pdf(tmp_path: Path, *fields: str, body: str = "Read the PDF, then answer.") -> Path:
    return write(tmp_path, "pdf", named("pdf", *fields, body=body))


def test_a_loaded_skill_carries_every_spec_field(tmp_path: Path) -> None:
    folder = write(tmp_path, "pdf", CASES["valid-all-spec-fields"].text)
    loaded, diagnostics = load(folder)
    assert diagnostics == []
    assert loaded == Skill(
        name="pdf",
        description="Extract text and tables from PDF files. Use when the user mentions PDFs.",
        folder=folder.resolve(),
        body="Read the PDF, then answer.",
        content_hash=hashlib.sha256((folder / "SKILL.md").read_bytes()).hexdigest(),
        license="Apache-2.0",
        compatibility="Requires poppler-utils",
        metadata={"author": "example-org", "version": "1.0"},
        allowed_tools=("Bash(pdftotext:*)", "Read"),
    )
    assert loaded.folder.is_absolute()


def test_block_scalars_keep_their_yaml_meaning(tmp_path: Path) -> None:
    literal, _ = load(write(tmp_path, "pdf", CASES["valid-block-scalar-literal"].text))
    folded, _ = load(write(tmp_path / "b", "pdf", CASES["valid-block-scalar-folded"].text))
    assert literal.description == "Line one.\nLine two."
    assert folded.description == "Folded text.\n"


def test_a_flow_list_of_allowed_tools_gives_one_tool_per_item(tmp_path: Path) -> None:
    loaded, _ = load(write_pdf(tmp_path, "allowed-tools: [Read, Bash(git status:*)]"))
    assert loaded.allowed_tools == ("Read", "Bash(git status:*)")


def test_crlf_and_a_bom_load_to_the_same_skill_with_the_hash_of_the_raw_bytes(tmp_path: Path) -> None:
    plain = md("name: pdf", DESCRIPTION, body="# PDF\n\nSteps.")
    raw = ("\ufeff" + plain.replace("\n", "\r\n")).encode()
    unix, _ = load(write(tmp_path / "unix", "pdf", plain))
    windows, diagnostics = load(write(tmp_path / "windows", "pdf", raw))
    assert diagnostics == []
    assert windows.body == unix.body == "# PDF\n\nSteps."
    assert windows.description == unix.description
    assert windows.content_hash == hashlib.sha256(raw).hexdigest() != unix.content_hash


def test_the_body_is_the_markdown_after_the_frontmatter_without_surrounding_blank_lines(tmp_path: Path) -> None:
    loaded, _ = load(write_pdf(tmp_path, body="\n  \n    indented code\n\nText with --- inside.\n---\n\n\n"))
    assert loaded.body == "    indented code\n\nText with --- inside.\n---"


def test_a_100kb_body_loads_whole(tmp_path: Path) -> None:
    body = "".join(f"Step {i}: do the next thing.\n" for i in range(4000))
    assert len(body) > 100_000
    loaded, _ = load(write_pdf(tmp_path, body=body))
    assert loaded.body == body.strip("\n")


def test_a_name_that_does_not_match_its_folder_loads_with_a_warning(tmp_path: Path) -> None:
    loaded, diagnostics = load(write(tmp_path, "pdf-tools", md("name: pdf", DESCRIPTION)))
    assert loaded.name == "pdf"
    assert [d.severity for d in diagnostics] == ["warning"]
    assert diagnostics[0].line == 2


def test_a_missing_name_takes_the_folders_name(tmp_path: Path) -> None:
    loaded, diagnostics = load(write(tmp_path, "pdf", md(DESCRIPTION)))
    assert loaded.name == "pdf"
    assert diagnostics[0].severity == "warning"


def test_a_badly_formed_name_is_kept_as_written(tmp_path: Path) -> None:
    loaded, _ = load(write(tmp_path, "PDF_Tools", md("name: PDF_Tools", DESCRIPTION)))
    assert loaded.name == "PDF_Tools"


def test_a_unicode_name_matches_its_folder_after_nfkc_normalisation(tmp_path: Path) -> None:
    # "ﬁ" (the fi ligature) is "fi" once NFKC-normalised, in the name as in the folder's name.
    loaded, diagnostics = load(write(tmp_path, "ﬁles", md("name: files", DESCRIPTION)))
    assert diagnostics == []
    assert loaded.name == "files"
    unicode, diagnostics = load(write(tmp_path, "données", md("name: données", "description: Analyse des données.")))
    assert diagnostics == []
    assert (unicode.name, unicode.description) == ("données", "Analyse des données.")


def test_a_title_case_unicode_name_is_not_lowercase(tmp_path: Path) -> None:
    assert_says(validate(write(tmp_path, "Données", md("name: Données", DESCRIPTION))), ("lowercase",))


def test_unknown_fields_are_kept_with_their_values(tmp_path: Path) -> None:
    loaded, _ = load(write_pdf(tmp_path, "version: 1.0", "user-invocable: true"))
    assert dict(loaded.unknown_fields) == {"version": 1.0, "user-invocable": True}
    assert [d.line for d in loaded.warnings] == [4, 5]


def test_load_reads_scalar_metadata_values_as_text_and_leaves_out_lists(tmp_path: Path) -> None:
    loaded, diagnostics = load(
        write_pdf(
            tmp_path, "metadata:", "  version: 1.0", "  beta: true", "  since: 2024-05-01", "  tags: [a]", "  note:"
        )
    )
    assert dict(loaded.metadata) == {"version": "1.0", "beta": "true", "since": "2024-05-01", "note": ""}
    assert [d.line for d in diagnostics] == [5, 6, 7, 8, 9]
    assert "ignored" in diagnostics[3].message


def test_an_unquoted_colon_in_a_value_is_read_as_text_by_load(tmp_path: Path) -> None:
    loaded, diagnostics = load(write(tmp_path, "pdf", md("name: pdf", "description: Use when: the user asks")))
    assert loaded.description == "Use when: the user asks"
    assert diagnostics[0].line == 3


def test_a_yaml_error_names_the_skill_md_file_and_line(tmp_path: Path) -> None:
    text = md("name: pdf", DESCRIPTION, "metadata:", "  author: me", "  version: [1.0", "license: MIT")
    folder = write(tmp_path, "pdf", text)
    loaded, diagnostics = load(folder)
    assert loaded is None
    (error,) = diagnostics
    assert error.line == 7
    # Where YAML gave up, and where the list it gave up on began.
    assert str(error).startswith(f"{folder / 'SKILL.md'}:7: the frontmatter is not valid YAML")
    assert "on line 6" in error.message


def test_diagnostics_read_as_path_line_message() -> None:
    path = Path("skills/pdf/SKILL.md")
    assert str(Diagnostic(path, 3, "error", "broken")) == "skills/pdf/SKILL.md:3: broken"
    assert str(Diagnostic(path, None, "error", "broken")) == "skills/pdf/SKILL.md: broken"
    assert str(Diagnostic(path, 3, "warning", "odd")) == "warning: skills/pdf/SKILL.md:3: odd"


@pytest.mark.parametrize("check", [load, validate], ids=["load", "validate"])
def test_a_folder_without_a_readable_skill_md_is_a_diagnostic_not_an_exception(tmp_path: Path, check) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "odd" / "SKILL.md").mkdir(parents=True)
    (tmp_path / "file").write_text("not a folder")
    for folder, says in [
        (tmp_path / "empty", "no SKILL.md"),
        (tmp_path / "missing", "no such folder"),
        (tmp_path / "file", "not a folder"),
        (tmp_path / "odd", "cannot be read"),
    ]:
        result = check(folder)
        diagnostics = result[1] if check is load else result
        assert [d.severity for d in diagnostics] == ["error"]
        assert says in diagnostics[0].message


def test_validate_reports_every_violation_at_once(tmp_path: Path) -> None:
    text = md(
        "name: Bad_Name-",
        "description: " + "d" * 1100,
        "compatibility: " + "c" * 600,
        "metadata: {n: 1}",
        "allowed-tools: [Read]",
        "license: [MIT]",
        "extra: x",
    )
    checked = validate(write(tmp_path, "bad", text))
    assert_says(
        [d for d in checked if d.severity == "error"],
        (
            "lowercase",
            "not '_'",
            "hyphen",
            "does not match",
            "1100 characters",
            "600 characters",
            "'n' must be text",
            "'allowed-tools' must be one line",
            "'license' must be text",
            "unknown field 'extra'",
        ),
    )
    assert_says([d for d in checked if d.severity == "warning"], ())


def make_files(folder: Path) -> None:
    (folder / "references" / "forms").mkdir(parents=True)
    (folder / "references" / "REFERENCE.md").write_text("ref")
    (folder / "references" / "forms" / "w9.md").write_text("form")
    (folder / "scripts").mkdir()
    (folder / "scripts" / "extract.py").write_text("print()")
    (folder / "LICENSE.txt").write_text("MIT")


def test_files_lists_the_other_files_as_sorted_relative_paths(tmp_path: Path) -> None:
    folder = write_pdf(tmp_path)
    make_files(folder)
    loaded, _ = load(folder)
    assert loaded.files() == ["LICENSE.txt", "references/REFERENCE.md", "references/forms/w9.md", "scripts/extract.py"]


def test_files_skips_hidden_files_and_pycache(tmp_path: Path) -> None:
    folder = write_pdf(tmp_path)
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("x")
    (folder / ".env").write_text("SECRET=1")
    (folder / "scripts" / "__pycache__").mkdir(parents=True)
    (folder / "scripts" / "__pycache__" / "run.cpython-311.pyc").write_bytes(b"\0")
    (folder / "scripts" / "run.py").write_text("print()")
    loaded, _ = load(folder)
    assert loaded.files() == ["scripts/run.py"]


def test_files_never_follows_a_symlink_out_of_the_folder(tmp_path: Path) -> None:
    outside = tmp_path / "secrets"
    outside.mkdir()
    (outside / "key.pem").write_text("secret")
    folder = write_pdf(tmp_path / "skills")
    make_files(folder)
    os.symlink(outside / "key.pem", folder / "references" / "key.pem")
    os.symlink(outside, folder / "assets")
    os.symlink("../..", folder / "references" / "up")
    os.symlink(folder / "LICENSE.txt", folder / "references" / "LICENSE.txt")
    os.symlink(folder / "scripts", folder / "scripts-link")
    loaded, _ = load(folder)
    files = loaded.files()
    assert "references/LICENSE.txt" in files
    assert not any("key.pem" in f or f.startswith(("assets", "references/up", "scripts-link")) for f in files)
    assert files == [
        "LICENSE.txt",
        "references/LICENSE.txt",
        "references/REFERENCE.md",
        "references/forms/w9.md",
        "scripts/extract.py",
    ]


# Random frontmatter: spec fields and strangers, values that are sound YAML, broken YAML, YAML
# that builds odd Python types, and random text; random line endings and indentation.
KEYS = st.one_of(
    st.sampled_from([*skill.SPEC_FIELDS, "version", "user-invocable", "", "? x", "- a", "<<", "&a k", "*a", "1"]),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12),
    st.text(max_size=12),
)
VALUES = st.one_of(
    st.sampled_from(
        [
            "pdf", "prop", "|-\n  text", ">\n  folded", "[a, b", "{a: 1}", "[Read, Bash(git:*)]", "*nope", "&x v",
            "!!binary ZZ", "!!python/object/apply:os.system [ls]", "2024-13-45", "1" * 5000, "0x" + "f" * 5000, "~",
            "yes", '"unterminated', "'it''s'", "@", "%TAG ! x", "\t", ":", "- - -", "!!set {a}", "!!timestamp x",
            "[" * 1200, "{a: [b, {c: d}]}", "a: b: c", "Use when: asked", "\x00", "\ufeff", "\u2028", "--- x", "...",
            "'a\n  b'", "2001-12-14t21:59:43.10-05:00", "1e999", ".nan", "!!float x", "!!int 0b2", "!!bool maybe",
            "!!omap [a]", "!!str [a]", "<<: 1", "? [a, b]\n: c", "\r\n  - x", "é" * 70, "null",
        ]
    ),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40),
    st.text(max_size=40),
)
INDENT = st.sampled_from(["", "", "", "", "  ", "\t", " "])
SEPARATOR = st.sampled_from([": ", ": ", ": ", ": ", ":", ":\t", " : ", ""])
LINE = st.tuples(INDENT, KEYS, SEPARATOR, VALUES).map("".join)


@st.composite
def skill_md_texts(draw) -> bytes:
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    # Often a sound start, so that the random lines after it reach the lenient paths of a load.
    start = draw(st.sampled_from([[], ["name: prop", "description: Does it."], ["description: Does it."]]))
    lines = draw(st.permutations([*start, *draw(st.lists(LINE, max_size=5))]))
    body = draw(st.text(max_size=200))
    if draw(st.booleans()):
        return eol.join(["---", *lines, "---", body]).encode("utf-8", "surrogatepass")
    before = draw(st.sampled_from(["\ufeff", " ", "\n", ""]))
    close = draw(st.sampled_from(["--- ", "", "...", "----", "---"]))
    return (before + eol.join(["---", *lines, close, body])).encode("utf-8", "surrogatepass")


# Well-formed YAML whose fields hold any type at all: what load must coerce or refuse, and validate name.
FIELD_VALUES = st.recursive(
    st.one_of(
        st.just("prop"), st.none(), st.booleans(), st.integers(), st.floats(), st.dates(), st.text(max_size=80),
        st.text(max_size=1100), st.binary(max_size=8),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=3),
    max_leaves=8,
)
SPEC_VALUES = st.fixed_dictionaries(
    {},
    optional={
        "name": st.just("prop") | FIELD_VALUES,
        "description": st.text(max_size=1100) | FIELD_VALUES,
        **{key: FIELD_VALUES for key in skill.SPEC_FIELDS[2:]},
    },
)
DOCUMENTS = st.tuples(SPEC_VALUES, st.dictionaries(st.text(max_size=12), FIELD_VALUES, max_size=3)).map(
    lambda d: f"---\n{yaml.safe_dump({**d[1], **d[0]}, allow_unicode=True)}---\nbody\n".encode("utf-8", "surrogatepass")
)

ANY_SKILL_MD = st.one_of(
    skill_md_texts(),
    skill_md_texts(),
    DOCUMENTS,
    DOCUMENTS,
    st.binary(max_size=300),
    st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.text(max_size=300).map(lambda t: f"---\n{t}\n---\nbody\n".encode("utf-8", "surrogatepass")),
    st.binary(max_size=200).map(lambda b: b"---\nname: prop\ndescription: " + b + b"\n---\n"),
)


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(raw=ANY_SKILL_MD)
def test_any_skill_md_either_loads_or_yields_a_diagnostic_and_never_raises(tmp_path: Path, raw: bytes) -> None:
    folder = tmp_path / "prop"
    folder.mkdir(exist_ok=True)
    (folder / "SKILL.md").write_bytes(raw)
    # Both YAML scanners agentd may run on: libyaml where installed, PyYAML's own otherwise.
    for loader in dict.fromkeys((skill._Loader, yaml.SafeLoader)):
        with mock.patch.object(skill, "_Loader", loader):
            loaded, diagnostics = load(folder)
            checked = validate(folder)
        assert all(isinstance(d, Diagnostic) and str(d) for d in [*diagnostics, *checked])
        if loaded is None:
            assert any(d.severity == "error" for d in diagnostics)
            assert any(d.severity == "error" for d in checked)
        else:
            assert all(d.severity == "warning" for d in diagnostics)
            assert isinstance(loaded.name, str) and loaded.name
            assert isinstance(loaded.description, str) and loaded.description.strip()
            assert all(isinstance(v, str) for v in loaded.metadata.values())
            assert all(isinstance(t, str) and t for t in loaded.allowed_tools)
            loaded.files()
        if not any(d.severity == "error" for d in checked):
            # What validate passes, load takes as written: only unknown fields are remarked on.
            assert loaded is not None
            assert all(d.message.startswith("unknown field") for d in diagnostics)
