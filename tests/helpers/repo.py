"""Where the repository and the tests' fixture files are, however deep below tests/ a test module sits."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
