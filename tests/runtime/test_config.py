"""Settings: defaults < agentd.toml < AGENTD_* environment < flags, and a bad value names its key and source."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runtime.config import load_settings
from runtime.errors import ConfigError


def test_defaults_put_everything_under_dot_agentd() -> None:
    s = load_settings(environ={})
    assert s.data_dir == Path(".agentd")
    assert s.url == "sqlite:///.agentd/agentd.db"
    assert s.log_file == Path(".agentd/logs/agentd.log")
    assert s.sqlite_synchronous == "full"


def test_file_beats_defaults_environment_beats_file_flags_beat_environment(tmp_path: Path) -> None:
    (tmp_path / "agentd.toml").write_text('port = 7000\nhost = "127.0.0.2"\nlog_level = "debug"\n')
    s = load_settings(environ={})
    assert (s.port, s.host, s.log_level) == (7000, "127.0.0.2", "debug")
    s = load_settings(environ={"AGENTD_PORT": "7001", "AGENTD_HOST": "127.0.0.3"})
    assert (s.port, s.host, s.log_level) == (7001, "127.0.0.3", "debug")
    s = load_settings(environ={"AGENTD_PORT": "7001"}, port=7002, host=None)
    assert (s.port, s.host) == (7002, "127.0.0.2")


def test_config_file_can_be_named_by_flag_or_environment(tmp_path: Path) -> None:
    (tmp_path / "other.toml").write_text("port = 7100\n")
    assert load_settings(tmp_path / "other.toml", environ={}).port == 7100
    assert load_settings(environ={"AGENTD_CONFIG": str(tmp_path / "other.toml")}).port == 7100


@pytest.mark.parametrize(
    ("toml", "environ", "message"),
    [
        ('port = "abc"\n', {}, "invalid value for port (from agentd.toml)"),
        ('sqlite_synchronous = "sometimes"\n', {}, "invalid value for sqlite_synchronous (from agentd.toml)"),
        ("", {"AGENTD_PORT": "99999"}, "invalid value for port (from AGENTD_PORT)"),
        ("", {"AGENTD_BUSY_TIMEOUT_MS": "-1"}, "invalid value for busy_timeout_ms (from AGENTD_BUSY_TIMEOUT_MS)"),
        ("colour = 'blue'\n", {}, "unknown setting 'colour' (from agentd.toml)"),
        ("", {"AGENTD_COLOUR": "blue"}, "unknown setting 'colour' (from AGENTD_COLOUR)"),
        ("port = \n", {}, "agentd.toml is not valid TOML"),
    ],
)
def test_a_bad_setting_names_its_key_and_where_it_came_from(tmp_path: Path, toml, environ, message) -> None:
    (tmp_path / "agentd.toml").write_text(toml)
    with pytest.raises(ConfigError) as err:
        load_settings(environ=environ)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_named_config_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing.toml does not exist"):
        load_settings(tmp_path / "missing.toml", environ={})


def test_model_is_a_known_name_or_a_path_from_any_source(tmp_path: Path) -> None:
    assert load_settings(environ={}).model is None  # the default model, qwen2.5-coder-0.5b
    assert load_settings(environ={"AGENTD_MODEL": "smollm2-135m"}).model == "smollm2-135m"
    (tmp_path / "agentd.toml").write_text('model = "/models/any.gguf"\n')
    assert load_settings(environ={}).model == "/models/any.gguf"
    # A flag hands over a Path; it is kept as the text the user typed, a name or a path alike.
    assert load_settings(environ={}, model=Path("qwen2.5-coder-1.5b")).model == "qwen2.5-coder-1.5b"
    assert load_settings(environ={}, model=Path("/models/other.gguf")).model == "/models/other.gguf"


@pytest.mark.parametrize(
    ("toml", "environ", "message"),
    [
        ('model = ""\n', {}, "invalid value for model (from agentd.toml)"),
        ("model = 7\n", {}, "invalid value for model (from agentd.toml)"),
        ("", {"AGENTD_MODEL": " "}, "invalid value for model (from AGENTD_MODEL)"),
    ],
)
def test_an_empty_or_non_text_model_names_its_source(tmp_path: Path, toml, environ, message) -> None:
    (tmp_path / "agentd.toml").write_text(toml)
    with pytest.raises(ConfigError) as err:
        load_settings(environ=environ)
    assert message in str(err.value)


def test_models_dir_defaults_beside_the_installation_and_can_be_moved(tmp_path: Path) -> None:
    assert load_settings(environ={}).models_dir == Path(sys.prefix) / "share" / "agentd" / "models"
    assert load_settings(environ={"AGENTD_MODELS_DIR": str(tmp_path / "m")}).models_dir == tmp_path / "m"
