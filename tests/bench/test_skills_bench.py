"""bench/skills_bench.py's per-request figures are computed at all: the bench is run by hand, so a name it
shadows would show only then."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

from runtime.skills import catalog
from tests.helpers import REPO

BENCH = REPO / "bench"


def words(text: str) -> int:
    return len(text.split())


@pytest.fixture
def skills_bench(monkeypatch: pytest.MonkeyPatch):
    # The bench imports its sibling `provenance` as a script does, from its own folder.
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("skills_bench", BENCH / "skills_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_per_request_counts_the_catalog_and_one_body_against_every_body(skills_bench, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    skills_bench.generate(root, 12, random.Random(skills_bench.SEED))
    names = sorted(catalog.discover([root]).skills)[:5]

    figures = skills_bench.per_request(root, names, 1024, words, tmp_path)

    assert figures["skills"] == 5 and figures["shown"] == 5
    assert figures["catalog_tokens"] > 0 and figures["activated"] in names
    assert figures["catalog_and_one_body_tokens"] == figures["catalog_tokens"] + figures["activated_body_tokens"]
    assert figures["every_body_tokens"] > figures["activated_body_tokens"]
