"""`agentd model`: which GGUF file agentd will load."""

from __future__ import annotations

from pathlib import Path

import click

from runtime.cli._app import App, pass_app
from runtime.model_file import resolve_model


@click.group()
def model() -> None:
    """Inspect the model agentd loads."""


@model.command()
@click.option("--model", "model_path", type=click.Path(path_type=Path), help="A GGUF file instead of the configured one.")
@pass_app
def path(app: App, model_path: Path | None) -> None:
    """Print the path of the model file, after checking it is a readable GGUF file."""
    click.echo(resolve_model(app.settings(model=model_path).model))
