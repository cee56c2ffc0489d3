"""A small project made up from a seed: the workspace a generated suite's cases run in, and the facts
it holds, kept as values so that every case's truth is computed from them and never read back.

Every project has the same kinds of files (a README, a pyproject, settings in one of four formats, a
CSV table, a JSON file, meeting notes, a log, a Python module, a script, a todo list, release notes),
but the names, values, sizes, nesting and formats are drawn from the seed, and each holds distractors:
an older copy of the table, an example settings file and a rotated log with look-alike values, so a
case answered from the wrong file fails.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen")

_PREFIXES = ("bird", "tide", "hop", "fern", "quill", "lark", "moss", "pebble", "kettle", "lantern", "orchard")
_SUFFIXES = ("log", "desk", "board", "keeper", "note", "track", "book", "sheet")
_PEOPLE = ("Ana", "Ben", "Chloe", "Dries", "Eva", "Femke", "Goran", "Hana", "Ivo", "Joost", "Kira", "Lotte",
           "Mila", "Noor", "Omar", "Pia", "Ravi", "Sanne", "Tomas", "Yara")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DEPENDENCIES = ("requests", "click", "pyyaml", "rich", "httpx", "pydantic", "jinja2", "attrs", "tabulate",
                 "python-dateutil")
_VENDORS = ("Northwind Storage", "Bluefin Hosting", "Corvid Cloud", "Harbour Backup", "Alder Systems")
_LOG_EVENTS = {
    "INFO": ("started", "loaded the settings", "wrote the daily summary", "retrying", "stopped cleanly"),
    "WARNING": ("slow response from the mail server", "disk 85% full", "retrying the upload",
                "the cache is stale"),
    "ERROR": ("could not reach the database", "the upload failed", "permission denied on the export folder",
              "gave up after 3 tries"),
}
# A word a README may misspell, and its spelling: the fix-a-typo cases' truth.
TYPOS = {"recieve": "receive", "seperate": "separate", "occured": "occurred", "adress": "address",
         "enviroment": "environment", "definately": "definitely", "wich": "which", "untill": "until"}
_TYPO_SENTENCES = {
    "receive": "You should {w} an answer within two working days.",
    "separate": "Keep a {w} folder for each season's data.",
    "occurred": "If an error {w}, the log says which file it was.",
    "address": "Write to the {w} below for help.",
    "environment": "Set up a virtual {w} before you install it.",
    "definitely": "Back up your data folder; you will {w} want it one day.",
    "which": "The settings file says {w} port the server uses.",
    "until": "The server keeps running {w} you stop it.",
}
_VERBS = ("load", "parse", "count", "format", "clean", "merge", "check", "export", "read", "summarise")
_NOUNS = ("records", "rows", "totals", "names", "dates", "entries", "labels", "report", "batch", "header")
_TODO = ("renew the domain", "update the budget sheet", "book the venue", "send the survey", "fix the login bug",
         "answer the mail from the printer", "write the release notes", "clean up the shared drive",
         "order new labels", "call the insurance office", "review the backup plan")
_ACTION = ("update the budget sheet", "book the venue for the offsite", "send the survey to customers",
           "draft the newsletter", "check the backup logs", "order the new laptops", "plan the spring workshop",
           "clean up the issue tracker")


@dataclass(frozen=True)
class Theme:
    """What the project's table records: the column that names a row and the one that measures it."""

    table: str
    entity: str
    measure: str
    person: str
    entities: tuple[str, ...]
    decimals: bool = False


THEMES = (
    Theme("sightings", "species", "count", "observer",
          ("blackbird", "robin", "wren", "magpie", "heron", "kestrel", "swift", "goldfinch", "jay", "starling",
           "nuthatch", "coot", "lapwing", "siskin")),
    Theme("orders", "product", "amount", "customer",
          ("desk lamp", "notebook", "stapler", "mug", "backpack", "cable", "monitor stand", "headset",
           "keyboard", "mouse pad", "water bottle", "chair mat"), decimals=True),
    Theme("inventory", "item", "stock", "supplier",
          ("bolts", "washers", "hinges", "screws", "brackets", "nails", "rivets", "clamps", "springs",
           "dowels", "anchors", "pins")),
    Theme("expenses", "category", "cost", "paid_by",
          ("rent", "travel", "software", "coffee", "printing", "postage", "training", "hosting", "phones",
           "furniture", "cleaning", "insurance"), decimals=True),
    Theme("rainfall", "station", "millimetres", "recorded_by",
          ("Ashby", "Brookfield", "Carrow", "Dunmore", "Elmstead", "Fairlie", "Glenholt", "Harwick",
           "Inverlea", "Kelso", "Larkhill", "Moorcroft")),
)


@dataclass(frozen=True)
class Row:
    id: int
    date: str
    entity: str
    measure: int | float
    person: str


@dataclass(frozen=True)
class Note:
    path: str
    title: str
    deadline_what: str
    deadline: str  # "14 November"
    deadline_iso: str
    actions: tuple[tuple[str, str], ...]  # (person, task)


@dataclass(frozen=True)
class Function:
    name: str
    calls: str | None  # the function it calls, if any


@dataclass
class Project:
    """The files of one generated workspace and the facts the cases are computed from."""

    name: str
    files: dict[str, str] = field(default_factory=dict)
    version: str = ""
    dependencies: tuple[str, ...] = ()
    email: str = ""
    typo: str = ""
    readme: str = "README.md"
    changelog: str = ""
    settings_path: str = ""
    settings_format: str = ""
    settings: dict[str, object] = field(default_factory=dict)
    theme: Theme = THEMES[0]
    table_path: str = ""
    rows: tuple[Row, ...] = ()
    json_path: str = ""
    team: tuple[dict[str, str], ...] = ()
    notes: tuple[Note, ...] = ()
    log_path: str = ""
    log_lines: tuple[tuple[str, str, str], ...] = ()  # (time, level, message)
    module_path: str = ""
    functions: tuple[Function, ...] = ()
    constant: tuple[str, int] = ("", 0)
    script_path: str = ""
    script_output: str = ""
    todo_path: str = ""
    todo: tuple[str, ...] = ()
    vendor: str = ""
    vendor_path: str = ""

    def levels(self, level: str) -> int:
        return sum(1 for _, lv, _ in self.log_lines if lv == level)


def number(value: int | float, decimals: bool) -> tuple[str, ...]:
    """The ways an answer may write a value: 12.5 as "12.5" or "12.50"; 3 as "3" or "three"."""
    if decimals:
        text = f"{value:.2f}"
        short = text.rstrip("0").rstrip(".")
        return tuple(dict.fromkeys([text, short]))
    n = int(value)
    return (str(n), NUMBER_WORDS[n]) if n < len(NUMBER_WORDS) else (str(n),)


def make(rng: random.Random) -> Project:
    name = rng.choice(_PREFIXES) + rng.choice(_SUFFIXES)
    p = Project(name=name)
    people = rng.sample(_PEOPLE, 6)
    _pyproject(rng, p)
    _changelog(rng, p)
    _settings(rng, p)
    _table(rng, p, people)
    _readme(rng, p, people)
    _team(rng, p, people)
    _notes(rng, p, people)
    _log(rng, p)
    _module(rng, p)
    _script(rng, p)
    _todo(rng, p)
    _vendor(rng, p)
    return p


def _pyproject(rng: random.Random, p: Project) -> None:
    p.version = f"{rng.randint(0, 3)}.{rng.randint(1, 9)}.{rng.randint(0, 9)}"
    p.dependencies = tuple(sorted(rng.sample(_DEPENDENCIES, rng.randint(2, 4))))
    deps = "".join(f'    "{d}>={rng.randint(1, 9)}.{rng.randint(0, 9)}",\n' for d in p.dependencies)
    p.files["pyproject.toml"] = (
        f'[project]\nname = "{p.name}"\nversion = "{p.version}"\nrequires-python = ">=3.10"\n'
        f"dependencies = [\n{deps}]\n"
    )


def _readme(rng: random.Random, p: Project, people: list[str]) -> None:
    p.email = f"{rng.choice(('help', 'support', 'team', 'hello'))}@{p.name}.example.org"
    p.typo = rng.choice(sorted(TYPOS))
    right = TYPOS[p.typo]
    sentence = _TYPO_SENTENCES[right].format(w=p.typo)
    p.readme = rng.choice(("README.md", "README.md", "docs/README.md"))
    p.files[p.readme] = (
        f"# {p.name}\n\n{p.name} keeps the team's {p.theme.table} in plain files.\n\n"
        f"## Install\n\n    pip install {p.name}\n\n## Support\n\n{sentence}\n"
        f"Questions go to {p.email}; {people[0]} looks after the project.\n"
    )


def _changelog(rng: random.Random, p: Project) -> None:
    p.changelog = rng.choice(("CHANGELOG.md", "HISTORY.md", "NEWS.md", "docs/releases.md"))
    major, minor, patch = (int(x) for x in p.version.split("."))
    older = [f"{major}.{minor - 1}.{rng.randint(1, 9)}", f"{major}.{minor - 1}.0"]
    p.files[p.changelog] = (
        f"# Changes\n\n## {p.version}\n\n- Fixed the date parser.\n\n## {older[0]}\n\n- Faster start-up.\n\n"
        f"## {older[1]}\n\n- First public release.\n"
    )


def _settings(rng: random.Random, p: Project) -> None:
    fmt = rng.choice(("yaml", "toml", "ini", "json"))
    p.settings_format = fmt
    p.settings_path = rng.choice((f"config/settings.{fmt}", f"config/{p.name}.{fmt}", f"settings.{fmt}"))
    ports = rng.sample(range(3000, 9900, 10), 2)
    timeouts = rng.sample(range(5, 120, 5), 2)
    p.settings = {"host": rng.choice(("localhost", "db.internal", "0.0.0.0")), "port": ports[0],
                  "timeout_seconds": timeouts[0], "retries": rng.randint(2, 9),
                  "log_level": rng.choice(("info", "warning")), "debug": rng.choice((True, False))}
    example = {**p.settings, "port": ports[1], "timeout_seconds": timeouts[1]}
    p.files[p.settings_path] = render_settings(fmt, p.settings)
    # Named so that no answer naming it contains the real file's name (`settings.yaml`).
    stem = p.settings_path.rsplit(".", 1)[0]
    p.files[f"{stem}.example.{fmt}"] = render_settings(fmt, example)


def render_settings(fmt: str, values: dict[str, object]) -> str:
    def scalar(v: object, quote: str) -> str:
        if isinstance(v, bool):
            return str(v).lower()
        return f"{quote}{v}{quote}" if isinstance(v, str) else str(v)

    if fmt == "json":
        return json.dumps(values, indent=2) + "\n"
    if fmt == "yaml":
        return "".join(f"{k}: {scalar(v, '')}\n" for k, v in values.items())
    if fmt == "toml":
        return "[server]\n" + "".join(f"{k} = {scalar(v, chr(34))}\n" for k, v in values.items())
    return "[server]\n" + "".join(f"{k} = {scalar(v, '')}\n" for k, v in values.items())


def setting_line(fmt: str, key: str, value: object) -> str:
    """How the settings file writes one key: the text a replace case looks for."""
    return render_settings(fmt, {key: value}).splitlines()[-1 if fmt != "json" else 1].strip().rstrip(",")


def _table(rng: random.Random, p: Project, people: list[str]) -> None:
    t = rng.choice(THEMES)
    p.theme = t
    n = rng.randint(6, 10)  # leaves names unused: an append case adds a row no other row has
    entities = rng.sample(t.entities, n)
    who = people[1:rng.randint(3, 5)]
    if t.decimals:
        measures: list[int | float] = [round(x / 4, 2) for x in rng.sample(range(8, 400), n)]
    else:
        measures = rng.sample(range(1, 60), n)
    start = rng.randint(100, 900)
    month = rng.randint(1, 12)
    rows = tuple(Row(start + i, f"2026-{month:02d}-{rng.randint(1, 28):02d}", entities[i], measures[i],
                     rng.choice(who)) for i in range(n))
    p.rows = rows
    p.table_path = rng.choice((f"data/{t.table}.csv", f"data/2026/{t.table}.csv", f"{t.table}.csv"))
    p.files[p.table_path] = _csv(t, rows)
    # Last year's table: the same columns, other rows, the same ids (a lookup in the wrong file differs).
    old = tuple(Row(r.id, r.date.replace("2026", "2025"), e, m, r.person) for r, e, m in
                zip(rows, rng.sample(t.entities, n), rng.sample(list(measures), n), strict=True))
    p.files[f"archive/{t.table}-2025.csv"] = _csv(t, old)


def _csv(t: Theme, rows: tuple[Row, ...]) -> str:
    head = f"id,date,{t.entity},{t.measure},{t.person}\n"
    return head + "".join(f"{r.id},{r.date},{r.entity},{_value(r.measure, t.decimals)},{r.person}\n" for r in rows)


def _value(v: int | float, decimals: bool) -> str:
    return f"{v:.2f}" if decimals else str(v)


def _team(rng: random.Random, p: Project, people: list[str]) -> None:
    roles = rng.sample(("maintainer", "reviewer", "designer", "tester", "writer", "release manager"), 4)
    p.team = tuple({"name": name, "email": f"{name.lower()}@{p.name}.example.org", "role": role}
                   for name, role in zip(people[:4], roles, strict=True))
    p.json_path = rng.choice(("data/team.json", "team.json", "config/people.json"))
    p.files[p.json_path] = json.dumps(list(p.team), indent=2) + "\n"


def _notes(rng: random.Random, p: Project, people: list[str]) -> None:
    notes = []
    days = rng.sample(range(1, 28), 2)
    month = rng.randint(1, 10)
    for i, day in enumerate(sorted(days)):
        path = f"notes/2026-{month:02d}-{day:02d}.md"
        due_day = rng.randint(1, 28)
        due_month = month + 1 + i
        what = rng.choice(("the Q3 report", "the grant application", "the site launch", "the audit"))
        actions = tuple(zip(rng.sample(people, 3), rng.sample(_ACTION, 3), strict=True))
        note = Note(path, f"Meeting, {day} {_MONTHS[month - 1]} 2026", what, f"{due_day} {_MONTHS[due_month - 1]}",
                    f"2026-{due_month:02d}-{due_day:02d}", actions)
        present = ", ".join(sorted({a for a, _ in actions}))
        p.files[path] = (
            f"# {note.title}\n\nPresent: {present}.\n\n## Decisions\n\n- {what.capitalize()} is due on "
            f"{note.deadline}.\n- The team meets again in two weeks.\n\n## Action items\n\n"
            + "".join(f"- {who}: {task}\n" for who, task in actions)
        )
        notes.append(note)
    p.notes = tuple(notes)


def _log(rng: random.Random, p: Project) -> None:
    name = rng.choice(("app", "server", "sync", p.name))
    p.log_path = rng.choice((f"logs/{name}.log", f"var/log/{name}.log"))
    counts = {"INFO": rng.randint(3, 6), "WARNING": rng.randint(1, 5), "ERROR": rng.randint(1, 5)}
    levels = [lv for lv, n in counts.items() for _ in range(n)]
    rng.shuffle(levels)
    lines = []
    minute = rng.randint(0, 20)
    for lv in levels:
        minute += rng.randint(1, 4)
        lines.append((f"09:{minute:02d}:{rng.randint(0, 59):02d}", lv, rng.choice(_LOG_EVENTS[lv])))
    p.log_lines = tuple(lines)
    p.files[p.log_path] = "".join(f"2026-11-30 {t} {lv} {msg}\n" for t, lv, msg in lines)
    # Yesterday's rotated log: the same kinds of lines in other numbers.
    rotated = [lv for lv in ("ERROR", "WARNING", "INFO") for _ in range(rng.randint(1, 6))]
    p.files[p.log_path + ".1"] = "".join(
        f"2026-11-29 10:{i:02d}:00 {lv} {rng.choice(_LOG_EVENTS[lv])}\n" for i, lv in enumerate(rotated)
    )


def _module(rng: random.Random, p: Project) -> None:
    package = p.name
    module = rng.choice(("stats", "tables", "report", "io", "helpers"))
    p.module_path = f"src/{package}/{module}.py"
    n = rng.randint(2, 5)
    names: list[str] = []
    while len(names) < n:
        candidate = f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"
        # No name inside another: a rename's check of the old name must not trip over a longer one.
        if all(candidate not in other and other not in candidate for other in names):
            names.append(candidate)
    funcs = [Function(names[0], None)] + [Function(name, names[i]) for i, name in enumerate(names[1:])]
    p.functions = tuple(funcs)
    const = rng.choice(("MAX_ROWS", "BATCH_SIZE", "DEFAULT_LIMIT", "PAGE_SIZE"))
    p.constant = (const, rng.choice((25, 50, 64, 100, 128, 200, 250, 500)))
    body = [f'"""Helpers for the {p.theme.table} table."""\n\n{const} = {p.constant[1]}\n']
    for f in funcs:
        inner = f"    return {f.calls}(items)[:{const}]" if f.calls else "    return [item for item in items if item]"
        body.append(f"\ndef {f.name}(items):\n{inner}\n")
    p.files[f"src/{package}/__init__.py"] = f'"""{package}: {p.theme.table} kept in plain files."""\n'
    p.files[p.module_path] = "\n".join(body)


def _script(rng: random.Random, p: Project) -> None:
    p.script_path = rng.choice(("tools/checksum.py", "scripts/check.py", f"tools/{p.name}_check.py"))
    words = rng.sample(_NOUNS, 3)
    # A five- or six-digit value nobody reads off the file: these cases are answered only by running it.
    total = sum(ord(c) * (i + 1) for i, c in enumerate("".join(words)))
    p.script_output = f"checksum {total}"
    p.files[p.script_path] = (
        f'"""Prints a checksum of the table names."""\n\nNAMES = {words!r}\n\n'
        'if __name__ == "__main__":\n'
        '    print("checksum", sum(ord(c) * (i + 1) for i, c in enumerate("".join(NAMES))))\n'
    )


def _todo(rng: random.Random, p: Project) -> None:
    p.todo_path = rng.choice(("todo.txt", "TODO.txt", "notes/todo.txt"))
    p.todo = tuple(rng.sample(_TODO, rng.randint(3, 6)))
    p.files[p.todo_path] = "".join(f"- {item}\n" for item in p.todo)


def _vendor(rng: random.Random, p: Project) -> None:
    """One sentence, in one file, that only its content can find: the find-by-content cases' truth."""
    p.vendor = rng.choice(_VENDORS)
    p.vendor_path = rng.choice(("docs/operations.md", "docs/backups.md", "notes/infrastructure.md", "docs/faq.md"))
    p.files[p.vendor_path] = (
        f"# {p.vendor_path.rpartition('/')[2][:-3].capitalize()}\n\nThe nightly backups go to {p.vendor}, "
        f"kept for {rng.choice((14, 30, 90))} days.\nAsk {p.team[1]['name']} before changing the schedule.\n"
    )
    p.files["docs/guide.md"] = f"# Guide\n\nRun `{p.name} list` to see the {p.theme.table}.\n"
