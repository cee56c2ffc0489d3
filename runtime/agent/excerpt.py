"""The lines of a file that a request asks about: retrieval within scope, inside one tool result.

A file read in whole is shown in whole, and the lines the user's request mentions are repeated after
it, counted. Measured on the default model with only the whole file in front of it: "Who placed order
1003?" was answered with the first row's customer, "How many errors are there in logs/app.log?" with
"1 errors", and "What email address do I write to for support?" with the sentence after the address.

Pure: the request's words and a file's text in, lines out. A word of the request matches a line that
has it as a whole word, without case, a plural matching its singular. Words of the file's own path
match nothing ("orders" in a question about orders.csv is every row), nor do the words of a question.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from runtime.agent.relevance import singular

# \w keeps a name with an underscore whole: "order" does not match a header's "order_id".
_WORD = re.compile(r"\w+")
_QUESTION = frozenset(
    "a about according all an and any are as at be by can could do does file files folder for from "
    "give has have how i in into is it its look lines line list many me much my new of on one or "
    "please put say says show tell that the there this to what when where which who why with you your "
    "make each only per should would will must need instead".split()
)
# At most this many lines are repeated; the rest are counted, and the file above still holds them.
EXCERPT_LINES = 12


@dataclass(frozen=True)
class Excerpt:
    words: tuple[str, ...]  # the request's words that matched, as it wrote them
    lines: tuple[str, ...]
    matched: int  # the lines shown, not counting headings and a CSV header row; a column's values
    total: int  # the file's non-empty lines; a column's rows
    column: str | None = None  # a CSV column the request names: `lines` are its values, each once

    def text(self) -> str:
        said = ", ".join(f'"{w}"' for w in self.words)
        head = f"lines that mention {said}: {self.matched} of {self.total}"
        if self.column is not None:
            head = f'the "{self.column}" column has {self.matched} different values in {self.total} rows:'
        shown = self.lines[:EXCERPT_LINES]
        more = [f"(and {len(self.lines) - len(shown)} more)"] if len(shown) < len(self.lines) else []
        return "\n".join([head, *shown, *more])


def is_question(request: str) -> bool:
    """Whether a request asks something, which an excerpt can answer. A request for a change gets
    none: the default model copies what a result shows into what it writes, and copied the excerpt
    too (its heading line written into the new file, the misspelt word kept as the fix)."""
    return "?" in request


def lines(request: str, path: str, content: str) -> Excerpt | None:
    """The lines of `content` that mention the most of `request`'s words, or None when no line
    mentions one, or every line does.

    In a CSV file a matching row comes with the header row, which names its columns; in Markdown a
    matching heading brings the lines of its section.
    """
    asked = _asked(request, path)
    rows = content.splitlines()
    filled = [i for i, line in enumerate(rows) if line.strip()]
    if not asked or len(filled) < 3:
        return None
    said: dict[int, list[str]] = {}
    for i in filled:
        words = {singular(w) for w in _WORD.findall(rows[i].lower())}
        hit = [w for key, w in asked.items() if key in words]
        if hit:
            said[i] = hit
    if not said or len(said) == len(filled):
        return None
    # The lines that mention the most of the request's words: "action items" picks the heading that
    # says both, not every line that says "November".
    most = max(len(hit) for hit in said.values())
    hits = [i for i, hit in said.items() if len(hit) == most]
    words = tuple(dict.fromkeys(w for i in hits for w in said[i]))
    shown = set(hits)
    if path.lower().endswith(".csv"):
        if hits == [filled[0]]:
            return _column(content, asked)  # only the header: a column is named, no row picked out
        shown.add(filled[0])
    elif path.lower().endswith((".md", ".markdown")):
        for i in hits:
            if _heading(rows[i]):
                shown |= set(_section(rows, i))
    kept = [i for i in sorted(shown) if rows[i].strip()]
    # Counted as a reader would count them: the rows and items, not the headings or the header row.
    counted = [i for i in kept if not _heading(rows[i]) and not (path.lower().endswith(".csv") and i == filled[0])]
    return Excerpt(words, tuple(rows[i] for i in kept), len(counted), len(filled))


def _asked(request: str, path: str) -> dict[str, str]:
    """The request's words that can pick out a line, keyed by their singular: not question words, not
    words of the path, and not short ones unless they hold a digit ("q3", "1003")."""
    own = {singular(w) for w in _WORD.findall(path.lower().replace("_", " "))}
    out: dict[str, str] = {}
    for w in _WORD.findall(request):
        key = singular(w.lower())
        if key in _QUESTION or key in own or w.lower() in _QUESTION:
            continue
        if len(key) >= 3 or (len(key) >= 2 and any(c.isdigit() for c in key)):
            out.setdefault(key, w)
    return out


def _column(content: str, asked: dict[str, str]) -> Excerpt | None:
    """The values of the first CSV column the request names, each once, in the order they come.
    Asked for "the customers in data/orders.csv, one name per line, each only once", the default
    model copied whole rows, ids and amounts with the names."""
    try:
        rows = [row for row in csv.reader(io.StringIO(content)) if any(cell.strip() for cell in row)]
    except csv.Error:
        return None
    for index, name in enumerate(rows[0] if rows else ()):
        key = singular(name.strip().lower())
        if key in asked:
            values = [row[index].strip() for row in rows[1:] if index < len(row) and row[index].strip()]
            distinct = tuple(dict.fromkeys(values))
            return Excerpt((asked[key],), distinct, len(distinct), len(rows) - 1, column=name.strip())
    return None


def _heading(line: str) -> bool:
    return line.lstrip().startswith("#")


def _section(rows: list[str], heading: int) -> range:
    """A Markdown heading's lines: up to the next heading of any level."""
    end = heading + 1
    while end < len(rows) and not _heading(rows[end]):
        end += 1
    return range(heading, end)
