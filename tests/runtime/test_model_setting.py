"""The model setting: a known model's name or anything that reads as a file; any other text is a bad
setting (exit 2) naming the key and where it came from, as every other bad setting is."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runtime.config import load_settings
from runtime.errors import ConfigError


def one_error_line(result: subprocess.CompletedProcess, code: int, *names: object) -> str:
    shown = f"exit {result.returncode}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    assert result.returncode == code, shown
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentd: "), shown
    for name in names:
        assert str(name) in lines[0], f"the error line does not name {name!r}\n{shown}"
    return lines[0]


def test_an_unknown_model_name_in_the_config_file_is_a_bad_setting_naming_the_key_and_file(
    agentd, isolated: Path
) -> None:
    (isolated / "agentd.toml").write_text('model = "qwen-7b"\n')
    submitted = agentd("task", "submit", "write the release notes")

    line = one_error_line(submitted, 2, "model", "agentd.toml", "qwen-7b", "qwen2.5-coder-0.5b")
    assert "invalid value for model" in line
    assert sorted(isolated.rglob("*")) == [isolated / "agentd.toml"], "the refused submit made nothing"
    one_error_line(agentd("task", "list", env={"AGENTD_MODEL": "qwen-7b"}), 2, "AGENTD_MODEL", "qwen-7b")


@pytest.mark.parametrize("value", ["qwen2.5-coder-1.5b", "models/any.gguf", "/models/any.gguf", "any.gguf"])
def test_a_known_model_name_or_anything_that_reads_as_a_file_is_accepted_as_the_model_setting(
    isolated: Path, value: str
) -> None:
    (isolated / "agentd.toml").write_text(f'model = "{value}"\n')
    assert load_settings(environ={}).model == value


def test_an_existing_file_without_a_gguf_suffix_is_accepted_as_the_model_setting(isolated: Path) -> None:
    (isolated / "mymodel").write_bytes(b"GGUF")
    assert load_settings(environ={"AGENTD_MODEL": "mymodel"}).model == "mymodel"


def test_an_unknown_model_name_from_any_source_is_a_config_error(isolated: Path) -> None:
    with pytest.raises(ConfigError, match=r"invalid value for model \(from --model\): no known model 'qwen-7b'"):
        load_settings(environ={}, model="qwen-7b")


def test_the_names_the_settings_accept_are_the_models_the_registry_describes() -> None:
    from runtime import model_name
    from runtime.inference.registry import KNOWN_MODELS

    assert tuple(KNOWN_MODELS) == model_name.NAMES
