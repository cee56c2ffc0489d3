"""Skills nested deeper than agentd searches are reported wherever skill problems are: the catalog,
`agentd skills list` and `validate`, and the daemon's log; none is dropped without a word."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from runtime import logs
from runtime.skills import catalog
from runtime.skills.watcher import CatalogWatcher


def nested(root: Path, levels: int) -> Path:
    """A folder `levels` levels below root: root/1/2/.../levels."""
    return root.joinpath(*(str(n) for n in range(1, levels + 1)))


def skill(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Formats release notes.\n---\nWrite them.\n")
    return folder


def test_a_skill_thirteen_folders_deep_is_reported_not_dropped(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    skill(nested(root, 1) / "near", "near")
    skill(nested(root, 12) / "buried", "buried")  # its folder is 13 levels below root
    found = catalog.discover([root])
    assert list(found.skills) == ["near"]
    (warning,) = found.warnings
    assert warning.path == nested(root, 12) / "buried" and warning.severity == "warning"
    assert f"folders more than 12 levels below {root} are not searched" in warning.message
    assert "name a folder nearer to them in skills_dirs" in warning.message


def test_deep_folders_are_one_warning_for_their_root_however_many_there_are(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for branch in ("a", "b", "c"):
        nested(root / branch, 14).mkdir(parents=True)
    found = catalog.discover([root])
    (warning,) = found.warnings
    assert warning.path == nested(root / "a", 12)


def test_a_skill_within_twelve_folders_is_still_named_and_its_deeper_neighbours_add_nothing(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    skill(nested(root, 11) / "deep", "deep")
    nested(root, 15).mkdir(parents=True)
    (warning,) = catalog.discover([root]).warnings
    assert "more than 6 folders deep" in warning.message and str(nested(root, 11) / "deep") in warning.message


def test_a_shallow_tree_reports_nothing(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    skill(nested(root, 2) / "near", "near")
    nested(root, 12).mkdir(parents=True)  # as deep as is searched, and empty
    found = catalog.discover([root])
    assert list(found.skills) == ["near"] and found.warnings == ()


def test_skills_list_and_validate_report_a_skill_too_deep_to_search(agentd, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    skill(nested(root, 1) / "near", "near")
    skill(nested(root, 12) / "buried", "buried")
    env = {"AGENTD_SKILLS_DIRS": str(root)}
    listed = agentd("skills", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    (warning,) = json.loads(listed.stdout)["warnings"]
    assert warning["path"] == str(nested(root, 12) / "buried") and "are not searched" in warning["message"]
    assert "are not searched" in agentd("skills", "list", env=env).stdout
    checked = agentd("skills", "validate", env=env)
    assert checked.returncode == 0, checked.stdout
    assert "are not searched" in checked.stdout and "1 skill checked: 0 errors, 1 warning" in checked.stdout
    named = agentd("skills", "validate", str(root))
    assert "are not searched" in named.stdout


def test_the_daemons_skill_watcher_logs_a_skill_too_deep_to_search(store, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    skill(nested(root, 12) / "buried", "buried")

    async def start_and_stop() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(CatalogWatcher(store, [root]).run)
            tg.cancel_scope.cancel()

    with logs.captured() as events:
        anyio.run(start_and_stop)
    said = [e["diagnostic"] for e in events if e["event"] == "skill warning"]
    assert len(said) == 1 and "are not searched" in said[0], events
