"""SKILL.md files as an author writes them, in skill folders of their own."""

from __future__ import annotations

from pathlib import Path

DESCRIPTION = "description: Extract text and tables from PDF files. Use when the user mentions PDFs."


def md(*fields: str, body: str = "Read the PDF, then answer.") -> str:
    return "---\n" + "\n".join(fields) + "\n---\n" + body + "\n"


def write(parent: Path, folder: str, text: str | bytes) -> Path:
    path = parent / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_bytes(text.encode() if isinstance(text, str) else text)
    return path
