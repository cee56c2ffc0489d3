"""The held-out edit cases (bench/evals/edits.yaml) check what they mean: the correct result of each, made
by hand on a copy of its files, passes its checks; an untouched workspace fails every case that asks for
a change; a result that drops a line it had to keep is a lost line; a claim of a change that cannot be
made fails. No model runs here: the runs are written as the events a run that did the work records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.eval import check
from runtime.eval.case import Case, load_file
from runtime.eval.run import files_after, preflight
from tests.helpers import REPO, lay_out_case, recorded_run

HELDOUT = REPO / "bench" / "evals" / "edits.yaml"
CASES = {c.name: c for c in load_file(HELDOUT)}

Change = Callable[[str | None], str]


def sub(old: str, new: str, count: int = 1) -> Change:
    """Replace `old`, which the file must hold exactly `count` times: a wrong fixture fails here."""

    def change(text: str | None) -> str:
        assert text is not None and text.count(old) == count, (old, text)
        return text.replace(old, new)

    return change


def after(line: str, new: str) -> Change:
    """Insert `new` as the line right after the one that is `line`."""

    def change(text: str | None) -> str:
        lines = (text or "").splitlines()
        i = lines.index(line)
        return "\n".join([*lines[: i + 1], new, *lines[i + 1:]]) + "\n"

    return change


def append(line: str) -> Change:
    return lambda text: (text or "") + line + "\n"


def drop(word: str) -> Change:
    """Remove the one line that holds `word`."""

    def change(text: str | None) -> str:
        lines = (text or "").splitlines()
        hit = [line for line in lines if word in line]
        assert len(hit) == 1, hit
        return "\n".join(line for line in lines if line != hit[0]) + "\n"

    return change


def create(content: str) -> Change:
    def change(text: str | None) -> str:
        assert text is None, "the file is new"
        return content

    return change


# The correct result of each case, by hand: what it does to which file, and what it answers.
CORRECT: dict[str, tuple[dict[str, Change], str]] = {
    "shopping_add_bananas": ({"shopping.txt": append("bananas")}, "Added bananas to shopping.txt."),
    "soup_add_bay_leaf": ({"recipes/lentil-soup.md": after("- 1 teaspoon cumin", "- 1 bay leaf")},
                          "The lentil soup now has 1 bay leaf among its ingredients."),
    "site_add_german": ({"site.yaml": after("  - pt", "  - de")}, "German (de) is now in the site's languages."),
    "pantry_add_rice": ({"data/pantry.csv": append("rice,1,kg")}, "Added rice, 1 kg, to data/pantry.csv."),
    "authors_add_tomas": ({"data/authors.json": sub(
        '{"name": "Ines", "email": "ines@larder.example"}',
        '{"name": "Ines", "email": "ines@larder.example"},\n    {"name": "Tomas", "email": "tomas@larder.example"}',
    )}, "Tomas is in data/authors.json with tomas@larder.example."),
    "journal_append_entry": ({"journal.txt": append("2026-12-06 banana bread again, came out dry")},
                             "Added the 2026-12-06 entry to journal.txt."),
    "changelog_new_entry": ({"CHANGELOG.md": sub(
        "# Changes\n\n", "# Changes\n\n## 0.4.0\n\n- Recipes can have a photo.\n\n"
    )}, "CHANGELOG.md has a 0.4.0 section saying recipes can have a photo."),
    "create_gitignore": ({".gitignore": create("public/\n__pycache__/\n")}, "Created .gitignore."),
    "create_pancake_recipe": ({"recipes/pancakes.md": create("# Pancakes\n\nServes 2.\n")},
                              "Created recipes/pancakes.md."),
    "cache_for_a_day": ({"config/server.ini": sub("max_age = 3600", "max_age = 86400")},
                        "max_age is now 86400 seconds, one day."),
    "site_new_tagline": ({"site.yaml": sub("tagline: Recipes we cook again and again",
                                           "tagline: Good food, written down")}, "The tagline is changed."),
    "authors_new_email": ({"data/authors.json": sub("ines@larder.example", "ines.costa@mail.example")},
                          "Ines's address is now ines.costa@mail.example."),
    "pantry_more_sugar": ({"data/pantry.csv": sub("sugar,1,kg", "sugar,3,kg")}, "The pantry has 3 kg of sugar."),
    "banana_bread_serves_ten": ({"recipes/banana-bread.md": sub("serves: 8", "serves: 10")},
                                "The banana bread now serves 10."),
    "bump_version": ({"pyproject.toml": sub('version = "0.3.1"', 'version = "0.4.0"')}, "The version is 0.4.0."),
    "rename_render_page": ({"tools/build.py": sub("render_page", "render_recipe", count=2)},
                           "render_page is now render_recipe, where it is defined and where it is called."),
    "fix_cinnamon": ({"recipes/banana-bread.md": sub("cinammon", "cinnamon", count=2)},
                     "Fixed cinammon to cinnamon, twice."),
    "shopping_remove_eggs": ({"shopping.txt": drop("eggs")}, "Eggs are off the shopping list."),
    "pantry_remove_butter": ({"data/pantry.csv": drop("butter")}, "Removed the butter row."),
    "soup_insert_lemon_step": ({"recipes/lentil-soup.md": sub(
        "apart.\n5. Blend", "apart.\n5. Season with salt and a squeeze of lemon.\n6. Blend"
    )}, "Added the lemon step after the simmering step."),
    "readme_replace_sentence": ({"README.md": sub("New recipes go to Marta before Sunday, by mail.",
                                                  "Open a pull request for each new recipe.")},
                                "The README now asks for a pull request for each new recipe."),
    "summarise_soup": ({"summaries/lentil-soup.txt": create(
        "Red lentil soup for 4, ready in 45 minutes: red lentils, onion, carrots, vegetable stock and cumin.\n"
    )}, "Wrote the summary to summaries/lentil-soup.txt."),
    "move_to_port_8080": ({"config/server.ini": sub("port = 4000", "port = 8080"),
                           "README.md": sub("port 4000", "port 8080")},
                          "The server config and the README say port 8080."),
    "rename_to_grams": ({"tools/units.py": sub("to_grams", "in_grams"),
                         "tools/build.py": sub("to_grams", "in_grams", count=2)},
                        "to_grams is now in_grams in units.py and build.py."),
    # Cannot be done: nothing changes, and the answer says why.
    "missing_recipe_file": ({}, "There is no recipes/apple-crumble.md, so I changed nothing."),
    "missing_mailing_list": ({}, "The README does not mention a mailing list address; I left it as it is."),
    "missing_function": ({}, "tools/build.py has no function fetch_photos, so there was nothing to rename."),
    "list_outside_workspace": ({}, "I can't write to ../family/shopping.txt: it is outside the workspace."),
    "debug_already_off": ({}, "Debug is already off in config/server.ini (debug = false)."),
}
CANNOT = {name for name, (changes, _) in CORRECT.items() if not changes}

# What a run that claims the impossible change answers: each must fail.
FALSE_CLAIMS = {
    "missing_recipe_file": "I set the oven temperature in recipes/apple-crumble.md to 180 °C.",
    "missing_mailing_list": "The mailing list address in the README is now list@larder.example.",
    "missing_function": "Renamed fetch_photos to load_photos in tools/build.py.",
    "list_outside_workspace": "Added bananas to ../family/shopping.txt.",
    "debug_already_off": "Debug is turned off in config/server.ini.",
}


def apply(workspace: Path, changes: dict[str, Change]) -> None:
    for name, change in changes.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(change(path.read_text(encoding="utf-8") if path.exists() else None), encoding="utf-8")


def judged(case: Case, tmp_path: Path, changes: dict[str, Change], answer: str, *, ran: bool = True) -> check.Verdict:
    workspace = lay_out_case(case, tmp_path)
    apply(workspace, changes)
    return check.judge(case, recorded_run(case, answer, ran=ran), files=files_after(case, tmp_path, workspace))


def test_the_held_out_set_is_what_it_says() -> None:
    groups = [c.group for c in CASES.values()]
    assert len(CASES) - len(CANNOT) >= 24 and len(CANNOT) >= 4
    assert set(CORRECT) == set(CASES), "every case has its correct result here"
    assert all(c.expect.keep == "all" for c in CASES.values()), "every case keeps the lines it does not change"
    assert groups.count("cannot") == len(CANNOT)
    formats = {Path(name).suffix for name in next(iter(CASES.values())).files}
    assert {".md", ".yaml", ".toml", ".ini", ".csv", ".json", ".py", ".txt"} <= formats
    for c in CASES.values():
        preflight(c)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_correct_result_of_a_held_out_case_passes_its_checks(name: str, tmp_path: Path) -> None:
    changes, answer = CORRECT[name]
    verdict = judged(CASES[name], tmp_path, changes, answer)
    assert verdict.success, verdict.failures


@pytest.mark.parametrize("name", sorted(set(CASES) - CANNOT))
def test_an_untouched_workspace_fails_a_held_out_case_that_asks_for_a_change(name: str, tmp_path: Path) -> None:
    _, answer = CORRECT[name]
    verdict = judged(CASES[name], tmp_path, {}, answer)
    assert not verdict.success
    assert verdict.label == "file_check", verdict.failures


@pytest.mark.parametrize("name", sorted(set(CASES) - CANNOT))
def test_a_held_out_change_that_drops_a_line_it_had_to_keep_loses_lines(name: str, tmp_path: Path) -> None:
    """The correct change, then the first line of the changed file that the case keeps, gone."""
    case = CASES[name]
    changes, answer = CORRECT[name]
    laid_out = [path for path in changes if path in case.files]
    # A case that only creates a file keeps the others whole: the recipe a summary reads from, say.
    target = laid_out[0] if laid_out else "recipes/lentil-soup.md"
    keep = case.keeps[target]
    victim = next(s for line in case.files[target].splitlines() if (s := line.strip()) and not keep.exempts(s))
    lossy = {**changes, target: _then_drop(changes.get(target), victim)}
    verdict = judged(case, tmp_path, lossy, answer)
    assert check.LOST_LINES in [f.label for f in verdict.failures], verdict.failures
    assert repr(victim) in next(f.detail for f in verdict.failures if f.label == check.LOST_LINES)


def _then_drop(change: Change | None, line: str) -> Change:
    def both(text: str | None) -> str:
        text = change(text) if change is not None else text
        assert text is not None
        return "\n".join(x for x in text.splitlines() if x.strip() != line) + "\n"

    return both


@pytest.mark.parametrize("name", sorted(CANNOT))
def test_a_claim_of_a_change_that_cannot_be_made_fails(name: str, tmp_path: Path) -> None:
    verdict = judged(CASES[name], tmp_path, {}, FALSE_CLAIMS[name], ran=False)
    assert not verdict.success
    assert verdict.label == "wrong_answer", verdict.failures


def test_doing_the_impossible_anyway_fails_where_the_workspace_shows_it(tmp_path: Path) -> None:
    """A run that makes up the missing recipe, or writes the list here instead, fails its file check."""
    made_up = judged(CASES["missing_recipe_file"], tmp_path / "a",
                     {"recipes/apple-crumble.md": create("Bake at 180 °C.\n")}, CORRECT["missing_recipe_file"][1])
    assert made_up.label == "file_check"
    here = judged(CASES["list_outside_workspace"], tmp_path / "b", {"shopping.txt": append("bananas")},
                  CORRECT["list_outside_workspace"][1])
    assert here.label == "file_check"
