"""The workspace's content index: which text files hold which words, for finding a file by what is in it.

Asked "which file says where the nightly backups go?", a small model reads the files whose names look
likely and answers from the wrong one; the index answers from every text file at once. It is kept
current by comparing each file's mtime and size with what was indexed, before every search: a walk of
stat calls, so only files that changed since are read again. It is bounded (files, bytes per file,
bytes in all) and leaves out agentd's data folder, hidden folders (`.git`, `.venv`), symlinks and
files that are not UTF-8 text. The index itself is `store.fulltext` (FTS5, BM25).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from store.fulltext import FullTextIndex, Hit

MAX_FILES = 5000
MAX_FILE_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024
# Characters of a line shown: a minified file is one long line.
LINE_CHARS = 240
_SNIFF = 8192

_WORD = re.compile(r"[^\W_]+(?:[_.@-][^\W_]+)*", re.UNICODE)
# Words that say what is asked, not what to look for: they are in every question.
_STOP = frozenset("""
a an and any are as at be by can could did do does for from has have how i if in into is it its me my of on
one or our please say says show tell that the their there these this to was we what when where which who
why will with you your file files folder project here keep kept written write find look line lines mention
mentions mentioned
""".split())


@dataclass(frozen=True)
class Found:
    """A matching line with the lines around it."""

    path: str
    line: int
    text: str
    before: str | None
    after: str | None
    score: float


def words(text: str) -> list[str]:
    """The words of a request worth looking for: no stop words, no one-letter words, each once."""
    seen = dict.fromkeys(w.casefold() for w in _WORD.findall(text))
    return [w for w in seen if len(w) > 1 and w not in _STOP]


class ContentIndex:
    def __init__(self, workspace: Path, index_dir: Path, protected: Sequence[Path] = ()) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.protected = tuple(Path(os.path.realpath(p)) for p in protected)
        digest = hashlib.sha256(str(self.workspace).encode()).hexdigest()[:16]
        self.index = FullTextIndex(index_dir / f"{digest}.db")
        self.skipped = 0

    def close(self) -> None:
        self.index.close()

    def refresh(self) -> int:
        """Bring the index up to the files on disk; returns how many files it holds."""
        on_disk = self._walk()
        known = self.index.known()
        self.index.remove([p for p in known if p not in on_disk])
        for rel, (mtime_ns, size) in on_disk.items():
            if known.get(rel) == (mtime_ns, size):
                continue
            text = self._text(self.workspace / rel)
            # A file that is not text is remembered with no lines, so it is not read again until it changes.
            self.index.replace(rel, mtime_ns, size, text.splitlines() if text is not None else [])
        return len(on_disk)

    def find(self, request: str, limit: int = 8) -> list[Found]:
        """The lines that best match the request's words, each with its neighbours, best first."""
        self.refresh()
        return [self._around(hit) for hit in self.index.search(words(request), limit)]

    def _around(self, hit: Hit) -> Found:
        near = self.index.lines(hit.path, hit.line - 1, hit.line + 1)
        clip = lambda s: None if s is None else s.strip()[:LINE_CHARS]  # noqa: E731
        return Found(hit.path, hit.line, clip(hit.text) or "", clip(near.get(hit.line - 1)),
                     clip(near.get(hit.line + 1)), round(hit.score, 3))

    def _walk(self) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        total = 0
        self.skipped = 0
        for folder, dirs, files in os.walk(self.workspace):
            here = Path(folder)
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not self._protected(here / d))
            for name in sorted(files):
                path = here / name
                try:
                    st = path.lstat()
                except OSError:
                    continue
                if not path.is_file() or path.is_symlink() or self._protected(path):
                    continue
                if st.st_size > MAX_FILE_BYTES or len(found) >= MAX_FILES or total + st.st_size > MAX_TOTAL_BYTES:
                    self.skipped += 1
                    continue
                total += st.st_size
                found[path.relative_to(self.workspace).as_posix()] = (st.st_mtime_ns, st.st_size)
        return found

    def _protected(self, path: Path) -> bool:
        return any(path == p or path.is_relative_to(p) for p in self.protected)

    @staticmethod
    def _text(path: Path) -> str | None:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if b"\x00" in data[:_SNIFF]:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None
