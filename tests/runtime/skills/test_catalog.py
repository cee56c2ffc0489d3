"""The catalog: which skill folders are found, which win, and the budgeted list the model is shown."""

from __future__ import annotations

import math
from pathlib import Path

from runtime.skills.catalog import HEADER, Catalog, CatalogEntry, discover, entries, render
from runtime.skills.skill import Skill


def add(
    parent: Path, name: str, description: str | None = None, *, folder: str | None = None, body: str = "Steps."
) -> Path:
    path = parent / (folder or name)
    path.mkdir(parents=True, exist_ok=True)
    text = f"---\nname: {name}\ndescription: {description or f'Does {name} things.'}\n---\n{body}\n"
    (path / "SKILL.md").write_text(text)
    return path


def words(text: str) -> int:
    return len(text.split())


def test_each_folder_with_a_skill_md_directly_under_a_root_is_a_skill(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    add(root, "pdf")
    add(root, "csv")
    (root / "README.md").write_text("not a skill")
    found = discover([root])
    assert list(found.skills) == ["csv", "pdf"]
    assert found.skills["pdf"].folder == (root / "pdf").resolve()
    assert found.skipped == found.warnings == ()


def test_a_folder_without_a_skill_md_is_a_collection_searched_deeper(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    add(root / "office", "docx")
    add(root / "office", "xlsx")
    add(root / "deep" / "er", "nested")
    found = discover([root])
    assert list(found.skills) == ["docx", "nested", "xlsx"]


def test_a_skill_folder_is_not_searched_further(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    outer = add(root, "pdf")
    add(outer / "examples", "inner")
    add(outer, "nested")
    assert list(discover([root]).skills) == ["pdf"]


def test_a_root_that_is_itself_a_skill_folder_is_that_one_skill(tmp_path: Path) -> None:
    pdf = add(tmp_path, "pdf")
    add(pdf, "inner")
    assert list(discover([pdf]).skills) == ["pdf"]


def test_hidden_folders_and_pycache_are_ignored(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    add(root, "pdf")
    add(root, "hidden", folder=".hidden")
    add(root / ".git", "in-git")
    add(root / "__pycache__", "cached")
    add(root / "office", "draft", folder=".draft")
    found = discover([root])
    assert list(found.skills) == ["pdf"]
    assert found.skipped == found.warnings == ()


def test_a_root_that_does_not_exist_is_a_warning_and_the_other_roots_still_load(tmp_path: Path) -> None:
    add(tmp_path / "skills", "pdf")
    found = discover([tmp_path / "nowhere", tmp_path / "skills"])
    assert list(found.skills) == ["pdf"]
    assert found.skipped == ()
    (warning,) = found.warnings
    assert (warning.path, warning.severity) == (tmp_path / "nowhere", "warning")
    assert "does not exist" in warning.message


def test_a_duplicate_name_keeps_the_first_root_and_names_both_paths(tmp_path: Path) -> None:
    project, user = tmp_path / "project", tmp_path / "user"
    add(project, "pdf", "The project's PDF skill.")
    add(user, "pdf", "The user's PDF skill.")
    found = discover([project, user])
    assert found.skills["pdf"].description == "The project's PDF skill."
    (skipped,) = found.skipped
    assert skipped.path == user / "pdf" / "SKILL.md"
    assert str(project / "pdf" / "SKILL.md") in skipped.message


def test_a_duplicate_name_within_a_root_keeps_the_first_in_path_order(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    add(root / "b-collection", "pdf", "Second.")
    add(root / "a-collection", "pdf", "First.")
    found = discover([root])
    assert found.skills["pdf"].description == "First."
    assert [d.path for d in found.skipped] == [root / "b-collection" / "pdf" / "SKILL.md"]


def test_a_broken_skill_is_reported_in_skipped_not_dropped_silently(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    add(root, "pdf")
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("---\nname: broken\n---\nNo description.\n")
    (root / "garbled").mkdir()
    (root / "garbled" / "SKILL.md").write_bytes(b"\xff\xfe---")
    found = discover([root])
    assert list(found.skills) == ["pdf"]
    assert [(d.path, d.severity) for d in found.skipped] == [
        (root / "broken" / "SKILL.md", "error"),
        (root / "garbled" / "SKILL.md", "error"),
    ]
    assert "description" in found.skipped[0].message


def test_warnings_of_loaded_skills_are_collected(tmp_path: Path) -> None:
    add(tmp_path / "skills", "pdf", folder="pdf-tools")
    found = discover([tmp_path / "skills"])
    assert list(found.skills) == ["pdf"]
    assert [w.path for w in found.warnings] == [tmp_path / "skills" / "pdf-tools" / "SKILL.md"]


def test_the_fingerprint_follows_skill_md_and_ignores_other_files(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    pdf = add(root, "pdf")
    add(root, "csv")
    (pdf / "references").mkdir()
    (pdf / "references" / "REFERENCE.md").write_text("v1")
    first = discover([root]).fingerprint
    assert discover([root]).fingerprint == first

    (pdf / "references" / "REFERENCE.md").write_text("v2")
    (pdf / "notes.txt").write_text("unrelated")
    assert discover([root]).fingerprint == first

    add(root, "pdf", body="Steps, revised.")
    revised = discover([root]).fingerprint
    assert revised != first

    add(root, "pdf", "A new description.", body="Steps, revised.")
    assert discover([root]).fingerprint not in (first, revised)


def test_a_thousand_skills_in_collections_are_all_discovered(tmp_path: Path) -> None:
    """How fast is bench/skills_bench.py's business; here, only that none is missed."""
    root = tmp_path / "skills"
    for i in range(1000):
        add(root / f"group-{i % 10}", f"skill-{i:04d}", f"Does task {i} when asked.", body="Step.\n" * 50)
    found = discover([root])
    assert sorted(found.skills) == [f"skill-{i:04d}" for i in range(1000)]
    assert found.skipped == ()


def catalog_of(descriptions: dict[str, str]) -> Catalog:
    skills = {
        name: Skill(name=name, description=text, folder=Path("/skills") / name, body="", content_hash=f"hash-{name}")
        for name, text in descriptions.items()
    }
    return Catalog(skills=skills)


DESCRIPTIONS = {
    "pdf": "Extract text and tables from PDF files, fill forms and merge documents. Use when the user mentions PDFs.",
    "csv": "Clean, join and summarise CSV files.\nUse for spreadsheets exported as text.",
    "git": "Review commits,   write messages and untangle merges in a git repository.",
    "zip": "Pack and unpack archives.",
}


def test_render_lists_skills_by_name_one_line_each_after_the_header() -> None:
    shown = [
        CatalogEntry(name="pdf", description="PDF files.", content_hash="h1", folder="/skills/pdf"),
        CatalogEntry(
            name="csv", description="CSV\n  files.\t", content_hash="h2", folder="/skills/csv", shortened=True
        ),
    ]
    assert render(shown) == f"{HEADER}\n- csv: CSV files.\n- pdf: PDF files."
    assert "activate_skill" in HEADER
    assert render(list(reversed(shown))) == render(shown)
    assert render([]) == ""


def test_entries_under_budget_show_every_description_whole_in_name_order() -> None:
    catalog = catalog_of(DESCRIPTIONS)
    shown = entries(catalog, 10_000, words)
    assert [e.name for e in shown] == ["csv", "git", "pdf", "zip"]
    assert not any(e.shortened for e in shown)
    assert shown[0] == CatalogEntry(
        name="csv", description="Clean, join and summarise CSV files. Use for spreadsheets exported as text.",
        content_hash="hash-csv", folder="/skills/csv", shortened=False,
    )
    assert shown[1].description == "Review commits, write messages and untangle merges in a git repository."


def test_entries_over_budget_shorten_long_descriptions_at_a_word_boundary_and_still_fit() -> None:
    catalog = catalog_of(DESCRIPTIONS)
    whole = {e.name: e.description for e in entries(catalog, 10_000, words)}
    budget = words(render(entries(catalog, 10_000, words))) - 8
    shown = entries(catalog, budget, words)
    assert words(render(shown)) <= budget
    assert [e.name for e in shown] == ["csv", "git", "pdf", "zip"]
    assert shown == entries(catalog, budget, words)
    assert {e.name for e in shown if e.shortened} >= {"pdf"}
    for e in shown:
        if e.shortened:
            assert e.description.endswith("…")
            kept = e.description.removesuffix("…")
            assert whole[e.name].startswith(kept)
            assert whole[e.name][len(kept)] == " "  # cut between words, not inside one
        else:
            assert e.description == whole[e.name]
    # Shortening keeps as much as fits: the shortest description is untouched.
    assert not next(e for e in shown if e.name == "zip").shortened


def test_entries_choose_the_largest_cap_that_fits() -> None:
    whole = {"a": "x" * 100, "b": "y" * 40}
    catalog = catalog_of(whole)
    chars = len
    # 12 characters are "\n- a: " and "\n- b: "; the rest is what the two descriptions may have.
    for budget in (len(HEADER) + 12 + 18, len(HEADER) + 12 + 80, len(HEADER) + 12 + 130):
        shown = entries(catalog, budget, chars)
        assert chars(render(shown)) <= budget
        cap = max(len(e.description) for e in shown)
        assert all(e.shortened == (len(whole[e.name]) > cap) for e in shown)
        # One more character per description would not fit (each description is one word: cut hard).
        wider = [e.model_copy(update={"description": whole[e.name][:cap] + "…"}) if e.shortened else e for e in shown]
        assert chars(render(wider)) > budget


def test_entries_leave_out_skills_by_name_order_when_even_names_do_not_fit() -> None:
    catalog = catalog_of({f"skill-{i:02d}": "A description." for i in range(20)})
    budget = words(HEADER) + 2 * 5  # a bare line is two words: "- skill-00:"
    shown = entries(catalog, budget, words)
    assert words(render(shown)) <= budget
    assert [e.name for e in shown] == [f"skill-{i:02d}" for i in range(5)]
    assert all(e.description == "" and e.shortened for e in shown)
    assert len(shown) < len(catalog.skills)
    assert entries(catalog, 0, words) == []


def test_entries_count_tokens_a_logarithmic_number_of_times() -> None:
    catalog = catalog_of({f"skill-{i:03d}": f"Skill number {i} " + "word " * (i % 50) for i in range(200)})
    calls = []

    def counting(text: str) -> int:
        calls.append(text)
        return len(text) // 4

    full = len(render(entries(catalog, 10**9, len))) // 4
    for budget in (full // 2, 100):
        calls.clear()
        entries(catalog, budget, counting)
        longest = max(len(s.description) for s in catalog.skills.values())
        assert len(calls) <= 2 + math.ceil(math.log2(max(longest, len(catalog.skills)))) + 1


def test_an_empty_catalog_renders_nothing() -> None:
    assert entries(Catalog(skills={}), 100, words) == []
    assert render([]) == ""
