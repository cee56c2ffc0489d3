"""Benchmark of Agent Skills' progressive loading: building the catalog, and the tokens it saves each request.

In one run on one machine, on skill folders generated into a temporary directory (1,000 by default:
names like `audit-invoices-17`, descriptions of 80-400 characters, bodies of 1-6 KB of Markdown, some
with references/ and scripts/ files, a quarter inside collection folders one level deeper):

    1. catalog build   `catalog.discover` over all of them (the first call reported apart, then
                       --runs warm calls), `catalog.entries` at the default skill budget (1,024 tokens)
                       with the smoke model's tokenizer, counting its tokenizer calls, and
                       `catalog.render`; median and p90 of --runs calls each. Also the tokens of the
                       whole catalog unshortened and at the budget, descriptions shortened, skills left out
    2. per request     for 10, 50 and 200 of those skills: tokens of the catalog block plus one
                       activated skill's body block (progressive loading), of every body as a block
                       (what a runtime without it would send), and of the catalog alone; the ratio of
                       the first two

Tokens are counted with the smoke model's own tokenizer (`LocalModel.count`, as the runtime counts
them), one block's `Block.render()` at a time, as the context manifest does.

It prints the figures and writes bench/results/skills.json. Timings are reported, never asserted.
See bench/README.md ("Skills").

    python bench/skills_bench.py                # 1,000 skills, 7 runs per timing; under a minute
    python bench/skills_bench.py --quick        # 3 runs per timing: a smoke run
    python bench/skills_bench.py --skills 5000 --sizes 10,50,200,1000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from provenance import git, save, version
from runtime.agent.context import skill_block
from runtime.agent.profiles import catalog_block, catalog_counter
from runtime.config import Settings
from runtime.inference.local import LocalModel
from runtime.inference.model_file import smoke_model_path
from runtime.skills import activation, catalog
from store.events import SkillActivated

HERE = Path(__file__).resolve().parent
DEFAULT_JSON = HERE / "results" / "skills.json"
DEFAULT_BUDGET = Settings.model_fields["skills_budget_tokens"].default
DEFAULT_SKILLS = 1_000
DEFAULT_RUNS = 7
QUICK_RUNS = 3
DEFAULT_SIZES = (10, 50, 200)
SEED = 20261129


# -- the generated skills ------------------------------------------------------------------------------

# (verb, its third person, what it does to the noun)
VERBS = (
    ("audit", "Audits", "checks them against the team's rules and lists every deviation with its location"),
    ("summarize", "Summarizes", "reads them in full and keeps the few facts a reviewer needs first"),
    ("validate", "Validates", "checks for structural errors, missing fields and values out of range"),
    ("convert", "Converts", "rewrites them into the target format, keeping every field and its order"),
    ("extract", "Extracts", "pulls the named fields out into a table, one row per record"),
    ("review", "Reviews", "reads them with a checklist and writes comments grouped by severity"),
    ("draft", "Drafts", "writes a first version from the team's template, to be edited by a person"),
    ("migrate", "Migrates", "moves them to the current schema version, recording each change it makes"),
    ("profile", "Profiles", "measures sizes, counts and distributions and reports the outliers"),
    ("debug", "Debugs", "narrows a failure down to the smallest input that still reproduces it"),
    ("triage", "Triages", "sorts them by urgency and owner, and flags the items nobody has picked up"),
    ("reconcile", "Reconciles", "matches two sources record by record and explains each mismatch"),
    ("document", "Documents", "writes reference notes with examples taken from the workspace"),
    ("refactor", "Refactors", "restructures them without changing behaviour, one small reviewed step at a time"),
    ("benchmark", "Benchmarks", "times them under fixed conditions and compares with the last baseline"),
    ("archive", "Archives", "packs them into dated, checksummed bundles and records where each one went"),
    ("translate", "Translates", "renders them into the requested language, keeping the terms of the glossary"),
    ("monitor", "Monitors", "watches for changes over time and reports when a threshold is crossed"),
    ("compare", "Compares", "sets them side by side and lists what was added, removed or changed"),
    ("index", "Indexes", "builds a searchable list by title, date and owner"),
    ("lint", "Lints", "runs the configured style checks and explains each warning in plain words"),
    ("scaffold", "Scaffolds", "creates the standard folder layout and starter files for a new one"),
    ("release", "Releases", "prepares, tags and announces them following the release checklist"),
    ("redact", "Redacts", "replaces the personal data and secrets they hold with placeholders"),
)
# (name part, how the text says it)
NOUNS = (
    ("invoices", "invoices"), ("csv-files", "CSV files"), ("pull-requests", "pull requests"),
    ("changelogs", "changelogs"), ("docker-images", "Docker images"), ("sql-queries", "SQL queries"),
    ("api-keys", "API keys"), ("log-files", "log files"), ("test-failures", "test failures"),
    ("terraform-plans", "Terraform plans"), ("release-notes", "release notes"), ("meeting-notes", "meeting notes"),
    ("json-schemas", "JSON schemas"), ("pdf-reports", "PDF reports"), ("spreadsheets", "spreadsheets"),
    ("incident-reports", "incident reports"), ("dependencies", "dependencies"),
    ("k8s-manifests", "Kubernetes manifests"),
    ("openapi-specs", "OpenAPI specifications"), ("support-tickets", "support tickets"), ("budgets", "budgets"),
    ("contracts", "contracts"), ("commit-history", "the commit history"), ("dashboards", "dashboards"),
    ("data-exports", "data exports"), ("config-files", "configuration files"), ("user-stories", "user stories"),
    ("backups", "backups"), ("cron-jobs", "cron jobs"), ("translations", "translation files"),
)
COLLECTIONS = ("finance-pack", "data-tools", "devops", "docs-team", "support-desk", "security", "release-eng", "legal")
WHEN = (
    "the user asks to {verb} {noun}",
    "a task mentions {noun} that look wrong or incomplete",
    "{noun} arrive from another team and must be checked before use",
    "preparing a weekly report that covers {noun}",
    "a reviewer asks what changed in {noun} since the last release",
    "{noun} are too many to read one by one",
    "the goal names a file under {folder}",
    "a change to {noun} is about to be merged",
)
EXTRA = (
    "Works on files inside the workspace only.",
    "Needs Python 3 with the standard library.",
    "Do not use it for {other}; another skill covers that.",
    "Reads at most 10,000 records per run.",
    "The result is a Markdown table the user can paste into a ticket.",
    "Slow on very large inputs; say so before starting.",
    "Never changes the original files.",
)
SENTENCES = (
    "Read {file} first and note how many records it holds before doing anything else.",
    "If a field is missing, say which record lacks it instead of guessing a value.",
    "Keep the original order of the {noun} in every table you produce.",
    "Quote numbers exactly as they appear; do not round them unless the user asks.",
    "When two {noun} disagree, list both values and the file each one came from.",
    "Prefer the script over reading large files with read_file: it is shorter and exact.",
    "Stop and ask the user when the input holds more than one format at once.",
    "Write the result to {out} unless the goal names another path.",
    "Dates are ISO 8601 in the output, whatever format the input uses.",
    "A value that looks like a secret is never copied into the output; write [redacted] instead.",
    "Check the totals at the end: the sum of the parts must equal the reported whole.",
    "Name each problem with its file and line so a person can find it quickly.",
    "Group findings by severity: blocking first, then warnings, then notes.",
    "If the workspace holds {folder}, the team's own rules in it take precedence over these.",
    "Say which steps you skipped and why, so the reviewer knows what was not checked.",
    "Large inputs can be sampled, but say how many records the sample holds.",
    "Do not reformat lines you did not change; reviewers read the diff.",
    "When nothing is wrong, say so in one line rather than listing every check that passed.",
)
FOLDERS = ("finance/", "data/", "ops/", "docs/", "reports/", "infra/", "support/", "legal/")


def generate(root: Path, count: int, rng: random.Random) -> dict:
    """`count` skill folders under `root`, a quarter of them inside collection folders; what was made."""
    made = {"skills": count, "in_collections": 0, "with_references": 0, "with_scripts": 0,
            "description_chars": [], "body_bytes": []}
    for n in range(1, count + 1):
        verb = rng.choice(VERBS)
        noun = rng.choice(NOUNS)
        name = f"{verb[0]}-{noun[0]}-{n}"
        parent = root
        if rng.random() < 0.25:
            parent = root / rng.choice(COLLECTIONS)
            made["in_collections"] += 1
        folder = parent / name
        folder.mkdir(parents=True)
        references = rng.random() < 0.4
        scripts = rng.random() < 0.3
        description = _description(verb, noun, rng)
        body = _body(name, verb, noun, references, scripts, rng)
        (folder / "SKILL.md").write_text(_frontmatter(name, description, scripts, rng) + body + "\n")
        if references:
            (folder / "references").mkdir()
            (folder / "references" / "REFERENCE.md").write_text(_reference(noun, rng))
            made["with_references"] += 1
        if scripts:
            (folder / "scripts").mkdir()
            (folder / "scripts" / "run.py").write_text(_script(name))
            made["with_scripts"] += 1
        made["description_chars"].append(len(description))
        made["body_bytes"].append(len(body.encode()))
    return made


def _description(verb: tuple, noun: tuple, rng: random.Random) -> str:
    target = rng.randint(80, 400)
    words = {"verb": verb[0], "noun": noun[1], "folder": rng.choice(FOLDERS), "other": rng.choice(NOUNS)[1]}
    parts = [f"{verb[1]} {noun[1]}: {verb[2]}."]
    whens = rng.sample(WHEN, len(WHEN))
    extras = rng.sample(EXTRA, len(EXTRA))
    parts.append(f"Use it when {whens.pop().format(**words)}.")
    while len(" ".join(parts)) < target and (whens or extras):
        if whens and (not extras or rng.random() < 0.5):
            parts[1] = parts[1][:-1] + f", or when {whens.pop().format(**words)}."
        else:
            parts.append(extras.pop().format(**words))
    text = " ".join(parts)
    while len(text) > 400:
        text = text[: text.rstrip(".").rfind(". ") + 1]
    if len(text) < 80:
        text += " Works on files inside the workspace only."
    return text


def _frontmatter(name: str, description: str, scripts: bool, rng: random.Random) -> str:
    lines = ["---", f"name: {name}", f"description: {json.dumps(description)}"]
    if rng.random() < 0.6:
        lines.append(f"license: {rng.choice(('Apache-2.0', 'MIT', 'Proprietary'))}")
    if rng.random() < 0.4:
        release = f"{rng.randint(1, 4)}.{rng.randint(0, 9)}"
        lines += ["metadata:", f"  author: {rng.choice(COLLECTIONS)}", f'  version: "{release}"']
    if scripts:
        lines.append("allowed-tools: run_skill_script read_skill_file")
    return "\n".join([*lines, "---", ""])


def _body(name: str, verb: tuple, noun: tuple, references: bool, scripts: bool, rng: random.Random) -> str:
    target = rng.randint(1024, 6144)
    folder = rng.choice(FOLDERS)
    words = {"noun": noun[1], "file": f"{folder}{noun[0]}.csv", "out": f"{folder}{verb[0]}-result.md",
             "folder": folder}

    def paragraph(k: int) -> str:
        return textwrap.fill(" ".join(s.format(**words) for s in rng.sample(SENTENCES, k)), 100)

    title = f"{verb[0].capitalize()} {noun[1]}"
    intro = f"Use this skill to {verb[0]} {noun[1]}. " + " ".join(s.format(**words) for s in rng.sample(SENTENCES, 2))
    sections = [f"# {title}", textwrap.fill(intro, 100)]
    sections += ["## When to use", "\n".join(f"- {w.format(verb=verb[0], noun=noun[1], folder=folder)}"
                                             for w in rng.sample(WHEN, 3))]
    steps = [s.format(**words) for s in rng.sample(SENTENCES, rng.randint(4, 7))]
    sections += ["## Steps", "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))]
    if scripts:
        call = {"tool": "run_skill_script", "arguments": {"skill": name, "script": "scripts/run.py",
                                                          "args": [words["file"]]}}
        sections += ["## Running the script", "Call `run_skill_script` with the input's path:",
                     f"```json\n{json.dumps(call)}\n```", paragraph(2)]
    if references:
        sections += ["## Reference", "The field-by-field rules are in `references/REFERENCE.md`; read it with "
                     "`read_skill_file` only when a field is in doubt. " + paragraph(1)]
    sections += ["## Output", f"A Markdown report at `{words['out']}`:",
                 "```markdown\n| record | finding | severity |\n|--------|---------|----------|\n```"]
    topics = ("edge cases", "large inputs", "formats", "what not to do", "handing over", "checks")
    while len("\n\n".join(sections)) < target:
        sections += [f"## Notes on {rng.choice(topics)}", paragraph(rng.randint(2, 5))]
    text = "\n\n".join(sections)
    cut = text.rfind("\n", 0, target)
    return text[:cut] if cut > 1024 else text


def _reference(noun: tuple, rng: random.Random) -> str:
    rows = "\n".join(f"| field_{i} | {rng.choice(('text', 'number', 'date', 'enum'))} | "
                     f"{rng.choice(('required', 'optional'))} |" for i in range(rng.randint(10, 40)))
    return f"# {noun[1].capitalize()}: fields\n\n| field | type | presence |\n|---|---|---|\n{rows}\n"


def _script(name: str) -> str:
    return (f'"""{name}: prints a summary of the file it is given."""\nimport sys\n\n'
            "for path in sys.argv[1:]:\n    with open(path) as f:\n        print(path, sum(1 for _ in f), 'lines')\n")


# -- measuring -----------------------------------------------------------------------------------------


class CountingTokenizer:
    """The model's `count`, counting its calls and the time spent in them."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self.calls = 0
        self.seconds = 0.0

    def __call__(self, text: str) -> int:
        started = time.perf_counter()
        n = self._count(text)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        return n


def percentile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def timing(samples: list[float]) -> dict:
    return {"median_ms": ms(statistics.median(samples)), "p90_ms": ms(percentile(samples, 90)),
            "min_ms": ms(min(samples)), "max_ms": ms(max(samples)), "runs": len(samples)}


def catalog_build(root: Path, runs: int, budget: int, count: Callable[[str], int]) -> dict:
    started = time.perf_counter()
    found = catalog.discover([root])
    first = time.perf_counter() - started
    warm = []
    for _ in range(runs):
        started = time.perf_counter()
        found = catalog.discover([root])
        warm.append(time.perf_counter() - started)

    entry_times, tokenizer_times = [], []
    for _ in range(runs):
        counter = CountingTokenizer(count)
        started = time.perf_counter()
        shown = catalog.entries(found, budget, counter)
        entry_times.append(time.perf_counter() - started)
        tokenizer_times.append(counter.seconds)
    render_times = []
    for _ in range(runs):
        started = time.perf_counter()
        text = catalog.render(shown)
        render_times.append(time.perf_counter() - started)

    full_text = catalog.render(catalog.entries(found, sys.maxsize, count))
    return {
        "skills_found": len(found.skills), "skipped": len(found.skipped), "warnings": len(found.warnings),
        "budget_tokens": budget, "header_tokens": count(catalog.HEADER),
        "discover_first_ms": ms(first), "discover": timing(warm),
        "entries": timing(entry_times), "entries_tokenizer_median_ms": ms(statistics.median(tokenizer_times)),
        "entries_tokenizer_calls": counter.calls,
        "render": timing(render_times),
        "full_catalog_chars": len(full_text), "full_catalog_tokens": count(full_text),
        "budget_catalog_chars": len(text), "budget_catalog_tokens": count(text),
        "shown": len(shown), "shortened": sum(e.shortened for e in shown),
        "left_out": len(found.skills) - len(shown),
    }


def per_request(root: Path, names: list[str], budget: int, count: Callable[[str], int], workdir: Path) -> dict:
    """Tokens a request carries for `names` installed: progressive loading against every body up front."""
    found = catalog.discover([root])
    installed = workdir / f"installed-{len(names)}"
    for name in names:
        shutil.copytree(found.skills[name].folder, installed / name)
    pinned = activation.pin([installed], budget, catalog_counter(count))
    (block,) = catalog_block(pinned)
    catalog_tokens = count(block.render())

    bodies = {}
    for name in names:
        s = found.skills[name]
        event = SkillActivated(call_index=1, name=name, content_hash=s.content_hash, folder=str(s.folder), body=s.body)
        bodies[name] = count(skill_block(event).render())
    # The skill a model would activate: the median body among those the catalog shows.
    shown = sorted((bodies[e.name], e.name) for e in pinned.entries)
    _, chosen = shown[len(shown) // 2]
    activated = activation.activate(pinned, chosen, call_index=1)
    assert isinstance(activated, SkillActivated), activated
    body_tokens = count(skill_block(activated).render())

    full = catalog.render(catalog.entries(catalog.discover([installed]), sys.maxsize, count))
    progressive = catalog_tokens + body_tokens
    every_body = sum(bodies.values())
    return {
        "skills": len(names), "shown": len(pinned.entries), "shortened": sum(e.shortened for e in pinned.entries),
        "left_out": len(pinned.left_out), "unshortened_catalog_tokens": count(full),
        "longest_description_shown": max(len(e.description) for e in pinned.entries),
        "catalog_tokens": catalog_tokens, "activated": chosen, "activated_body_tokens": body_tokens,
        "catalog_and_one_body_tokens": progressive, "every_body_tokens": every_body,
        "every_body_over_progressive": round(every_body / progressive, 2),
        "body_tokens_median": statistics.median(bodies.values()),
    }


# -- the run -------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skills", type=int, default=DEFAULT_SKILLS,
                    help=f"skills to generate (default {DEFAULT_SKILLS:,})")
    ap.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"timed runs of each call (default {DEFAULT_RUNS})")
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                    help="skills installed in the per-request comparison (default 10,50,200)")
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                    help=f"the catalog's token budget (default {DEFAULT_BUDGET}, agentd's skills_budget_tokens)")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_RUNS} runs per timing")
    ap.add_argument("--json", default=str(DEFAULT_JSON))
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.quick:
        args.runs = QUICK_RUNS
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if max(args.sizes) > args.skills:
        ap.error(f"--sizes goes up to {max(args.sizes)}, more than the {args.skills} skills generated")
    return args


def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the figures."""
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def render(meta: dict, results: dict) -> str:
    g, c = results["generated"], results["catalog"]
    desc, body = g["description_chars"], g["body_bytes"]

    def t(x: dict) -> str:
        return f"median {x['median_ms']:9.2f} ms   p90 {x['p90_ms']:9.2f} ms   ({x['runs']} runs)"

    lines = [
        f"Catalog build: {g['skills']:,} skills ({g['in_collections']} in collections, {g['with_references']} with "
        f"references/, {g['with_scripts']} with scripts/); descriptions {desc['min']}-{desc['max']} chars "
        f"(median {desc['median']}), bodies {body['min']:,}-{body['max']:,} bytes (median {body['median']:,})",
        f"  discover   first call {c['discover_first_ms']:9.2f} ms   then {t(c['discover'])}"
        f"   found {c['skills_found']:,}, skipped {c['skipped']}, warnings {c['warnings']}",
        f"  entries    {t(c['entries'])}   at {c['budget_tokens']:,} tokens: {c['entries_tokenizer_calls']} tokenizer "
        f"calls, {c['entries_tokenizer_median_ms']:.2f} ms of it in the tokenizer",
        f"  render     {t(c['render'])}",
        f"  catalog unshortened   {c['full_catalog_tokens']:8,} tokens ({c['full_catalog_chars']:,} chars)",
        f"  catalog at budget     {c['budget_catalog_tokens']:8,} tokens ({c['budget_catalog_chars']:,} chars): "
        f"{c['shown']:,} skills shown, {c['shortened']:,} descriptions shortened, {c['left_out']:,} skills left out",
        f"  (both include the catalog's header line, {c['header_tokens']} tokens)",
        "",
        f"Tokens per request, one skill activated (catalog budget {c['budget_tokens']:,} tokens; "
        f"model context {meta['n_ctx']:,} tokens)",
        "  (a) progressive: catalog block + the activated skill's body block    "
        "(b) every body as a block    (c) catalog block alone",
        f"  {'skills':>6}  {'shown':>5}  {'shortened':>9}  {'desc ≤':>6}  {'left out':>8}  {'unshortened':>11}  "
        f"{'(c)':>6}  "
        f"{'body':>5}  {'(a)':>6}  {'(b)':>8}  {'b/a':>6}  {'(b) fits':>8}",
    ]
    for r in results["per_request"]:
        fits = "yes" if r["every_body_tokens"] <= meta["n_ctx"] else "no"
        lines.append(
            f"  {r['skills']:6,}  {r['shown']:5,}  {r['shortened']:9,}  {r['longest_description_shown']:6,}  "
            f"{r['left_out']:8,}  "
            f"{r['unshortened_catalog_tokens']:11,}  {r['catalog_tokens']:6,}  {r['activated_body_tokens']:5,}  "
            f"{r['catalog_and_one_body_tokens']:6,}  {r['every_body_tokens']:8,}  "
            f"{r['every_body_over_progressive']:5.1f}×  {fits:>8}"
        )
    lines.append("  (desc ≤: the longest description shown, in chars; unshortened: the catalog's text with every "
                 "description whole;\n   body: the activated skill's block, the median body among the skills shown)")
    return "\n".join(lines)


def spread(values: list[int]) -> dict:
    return {"min": min(values), "median": int(statistics.median(values)), "max": max(values)}


def describe_run(args: argparse.Namespace, model: LocalModel) -> dict:
    return {
        "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "argv": sys.argv[1:], "skills": args.skills, "runs": args.runs, "sizes": args.sizes,
        "budget_tokens": args.budget, "seed": SEED, "token_model": model.name, "n_ctx": model.n_ctx,
        "cpus": os.cpu_count(), "machine": platform.platform(), "python": platform.python_version(),
        "llama_cpp_python": version("llama_cpp_python"), "pyyaml": yaml.__version__,
        "libyaml": bool(getattr(yaml, "__with_libyaml__", False)),
        "git_commit": git(["rev-parse", "HEAD"]),
        "runtime_uncommitted_changes": git(["status", "--porcelain", "--", ":/runtime"]),
    }






def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rng = random.Random(SEED)
    progress("loading the smoke model's tokenizer")
    model = LocalModel(smoke_model_path(), kv_cache_bytes=0)
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "skills")
        progress(f"generating {args.skills:,} skills")
        made = generate(root, args.skills, rng)
        results["generated"] = {**made, "description_chars": spread(made["description_chars"]),
                                "body_bytes": spread(made["body_bytes"])}
        progress(f"catalog build: {args.runs} runs each of discover, entries, render")
        results["catalog"] = catalog_build(root, args.runs, args.budget, model.count)
        names = rng.sample(sorted(catalog.discover([root]).skills), max(args.sizes))
        results["per_request"] = []
        for size in args.sizes:
            progress(f"per request: {size} skills installed")
            results["per_request"].append(per_request(root, names[:size], args.budget, model.count, Path(tmp)))
    meta = describe_run(args, model)
    model.close()
    print(render(meta, results))
    save(args.json, meta, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
