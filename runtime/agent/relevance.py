"""Which of the workspace's files a request points at, and which commands it gives to run.

Retrieval within scope, applied to the action space: a request that names a file ("data/orders.csv",
"the README", "my todo list") or a folder ("in my notes") is about those files, and the grammar
offers read_file only them. Measured on the default model with every file offered, it read files the
request had nothing to do with after the right one (logs/app.log for "How many orders are in
data/orders.csv?"), and then answered with the last file's content. A request that points at no
file is offered every file, as before.

Pure: words in, paths out. Matching is on whole words, without case, and a plural matches its
singular ("orders" the file orders.csv, "note" the folder notes/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_WORD = re.compile(r"[a-z0-9]+")
# Words of a path that say nothing about what the file holds: extensions, and words a request uses
# for any file ("the file", "that folder").
_NOISE = frozenset({
    "md", "txt", "py", "csv", "toml", "json", "yaml", "yml", "cfg", "ini", "log", "html", "js", "ts", "rst",
    "the", "and", "for", "file", "files", "folder", "dir",
})


def focus(request: str, files: Iterable[str], matched: Iterable[str] = ()) -> set[str]:
    """The files `request` points at, the first of these that is not empty: those it names by path
    or file name; those it names by a file name without its extension ("the README"); those in a
    folder or with a name word it uses; those whose lines best matched its words (`matched`, the
    content index's); all of them."""
    files = set(files)
    found_by_content = set(matched) & files
    text = request.lower()
    words = {singular(w) for w in _WORD.findall(text)}
    tiers = (
        lambda f: _written(text, f),
        lambda f: _stem_named(_name(f), words),
        lambda f: bool(_path_words(f) & words),
        lambda f: f in found_by_content,
    )
    for pointed in tiers:
        found = {f for f in files if pointed(f)}
        if found:
            return found
    return files


def names_a_file(request: str, files: Iterable[str]) -> bool:
    """Whether `request` writes out the name of a file, one of `files` or a new one: "the backups"
    names no file, even beside docs/backups.md; "docs/backups.md" or "backups.md" does."""
    text = request.lower()
    return any(_written(text, f) for f in files) or bool(new_paths(request, files))


def _written(text: str, path: str) -> bool:
    return _mentions(text, path.lower()) or _mentions(text, _name(path))


# A file name as a request writes one: a name with an extension, maybe a folder or two before it.
_PATH = re.compile(
    r"(?<![\w@/.-])((?:\.\.?/)*(?:[\w-]+/)*[\w-][\w.-]+\.[a-z][a-z0-9]{0,7})(?![\w/-])", re.IGNORECASE
)


def new_paths(request: str, files: Iterable[str]) -> set[str]:
    """Files the request names that are not among `files`: the new files it asks for ("Create a file
    hello.txt"), as written, so that a path outside the workspace is refused by the tool, not renamed."""
    known = {f.lower() for f in files}
    found = {m.rstrip(".") for m in _PATH.findall(request)}
    return {p for p in found if p.lower() not in known and not any(k.endswith("/" + p.lower()) for k in known)}


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1].lower()


def _stem_named(name: str, words: set[str]) -> bool:
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return len(stem) >= 3 and _WORD.fullmatch(stem) is not None and singular(stem) in words


def _mentions(text: str, phrase: str) -> bool:
    """`phrase` in `text` as it is, not as part of a longer name ("app.py" is not in "myapp.py")."""
    return re.search(rf"(?<![\w./-]){re.escape(phrase)}(?![\w/-])", text) is not None


def _path_words(path: str) -> set[str]:
    """The words of a path that can tie it to a request: alphabetic ones of 3 or more letters, and
    numbers of 4 digits (a year)."""
    out = set()
    for w in _WORD.findall(path.lower()):
        if w in _NOISE:
            continue
        if (w.isalpha() and len(w) >= 3) or (w.isdigit() and len(w) == 4):
            out.add(singular(w))
    return out


def singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


# A command as a request gives one: in backticks, in a request that asks to run something.
_SPAN = re.compile(r"`([^`\n]+)`")
_RUN = re.compile(r"\b(?:run|execute|start)\b", re.IGNORECASE)


def commands(request: str) -> tuple[str, ...]:
    """The commands a request gives to run, as written: its `code spans`, where it asks to run, execute
    or start something ("Run `python3 src/app.py`"); none where the spans are names ("rename `greet`")."""
    if not _RUN.search(request):
        return ()
    return tuple(dict.fromkeys(span.strip() for span in _SPAN.findall(request) if span.strip()))
