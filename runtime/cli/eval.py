"""`agentd eval`: measure whether the agent finishes the work, on task sets kept as YAML files."""

from __future__ import annotations

import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.output import echo_json


@click.group("eval")
def eval_() -> None:
    """Run task sets as real tasks and report how often they succeed."""


@eval_.command()
@click.option("--seed", type=click.IntRange(min=0), required=True,
              help="The suite's seed: the same seed, the same cases.")
@click.option("--count", type=click.IntRange(min=1, max=10_000), default=150, show_default=True,
              help="Cases to make.")
@click.option("-o", "--out", type=click.Path(path_type=Path), required=True,
              help="A new or empty folder for the files.")
def generate(seed: int, count: int, out: Path) -> None:
    """Write a task suite generated from SEED: projects, and cases over them whose truth is computed.

    Each family (find, count, sum, look up, extract, write, append, replace, rename, fix a typo,
    several steps, run with approval, refuse, ignore a planted instruction) gets cases in turn, over
    workspaces whose names, values, formats and distractor files come from the seed. Run them with
    `agentd eval tasks OUT/*.yaml`; the report gives success per family.
    """
    from runtime.eval.suite import write

    written = write(out, seed, count)
    click.echo(f"{count} cases over {len(written)} projects in {out} (seed {seed})")


@eval_.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--model", "model_name", help="GGUF file (or model name) to evaluate (default: the configured one).")
@click.option("--runs", type=click.IntRange(min=1), default=1, show_default=True, help="Runs of each case.")
@click.option("--case", "only", multiple=True, help="Run only this case (repeatable).")
@click.option(
    "--reports",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for the JSON report (default: <data_dir>/reports).",
)
@click.option("--keep", is_flag=True, help="Keep each run's scratch folder (store, workspace) and print where.")
@json_option
@pass_app
def tasks(
    app: App,
    files: tuple[Path, ...],
    model_name: str | None,
    runs: int,
    only: tuple[str, ...],
    reports: Path | None,
    keep: bool,
    as_json: bool,
) -> None:
    """Run each case of FILE... as a task, RUNS times, and report successes per case.

    Every check is made against what the run recorded: the tools it ran, what the model was shown and
    said, the prompts, the files in its workspace afterwards. The exit code is 0 whenever the eval
    ran, whatever the success rate; 2 for a bad case file, 1 when it could not run.
    """
    # Imported here: `agentd --help` should not pay for the agent loop and llama.cpp.
    from tqdm import tqdm

    from runtime.daemon.wiring import open_model
    from runtime.eval import case as cases_, report
    from runtime.eval.run import preflight, run_case

    cases = cases_.load(list(files))
    if only:
        names = {c.name for c in cases}
        unknown = [n for n in only if n not in names]
        if unknown:
            raise cases_.CaseFileError(
                f"--case: no case {unknown[0]!r} in {', '.join(map(str, files))}; cases: {', '.join(sorted(names))}"
            )
        cases = [c for c in cases if c.name in only]
    for c in cases:
        preflight(c)

    settings = app.settings(model=model_name)
    folder = reports or settings.data_dir / "reports"
    started_at = datetime.now(UTC)
    model = open_model(settings)
    root = Path(tempfile.mkdtemp(prefix="agentd-eval-"))
    results = []
    # A terminal gets the bar; a pipe (CI, a log file) one plain line per finished run instead.
    live = sys.stderr.isatty()
    try:
        with tqdm(total=len(cases) * runs, unit="run", file=sys.stderr, disable=not live, dynamic_ncols=True) as bar:
            for c in cases:
                for n in range(1, runs + 1):
                    bar.set_description(f"{c.name} run {n}/{runs}")
                    bar.set_postfix_str(f"ok {sum(r.success for r in results)}/{len(results)}")
                    result = run_case(c, n, base=settings, model=model, root=root)
                    results.append(result)
                    bar.update()
                    if not live:
                        said = "ok" if result.success else f"{result.label}: {result.detail}"
                        if result.false_claim:
                            said += " (a false claim: it ended completed with an answer)"
                        click.echo(
                            f"[{len(results)}/{bar.total}] {c.name} run {n}/{runs}: {said} "
                            f"({sum(r.success for r in results)} ok so far)",
                            err=True,
                        )
            bar.set_postfix_str(f"ok {sum(r.success for r in results)}/{len(results)}")
    finally:
        close = getattr(model, "close", None)
        if close is not None:
            close()
        if keep:
            click.echo(f"scratch folders kept in {root}", err=True)
        else:
            shutil.rmtree(root, ignore_errors=True)

    finished_at = datetime.now(UTC)
    described = {
        "name": model.name,
        "path": str(getattr(model, "path", "")) or None,
        "url": settings.model_url,
        "n_ctx": model.n_ctx,
    }
    built = report.build(
        results, model=described, files=[str(f) for f in files], runs_per_case=runs,
        started_at=started_at, finished_at=finished_at,
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / report.file_name(model.name, started_at)
    path.write_text(report.dumps(built), encoding="utf-8")
    if as_json:
        echo_json(built)
        click.echo(f"report: {path}", err=True)
    else:
        click.echo(report.render(built))
        click.echo(f"report: {path}")
