"""Known models by name, and whether a `model` setting names one or a file.

A leaf module, so that the settings can refuse a mistyped name where it was written without the
registry of what each model is (runtime.inference.registry), which the settings may not import.
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime.errors import ConfigError

DEFAULT = "qwen2.5-coder-0.5b"
QUALITY = "qwen2.5-coder-1.5b"
SMOKE = "smollm2-135m"
NAMES = (DEFAULT, QUALITY, SMOKE)


def check(text: str) -> str:
    """`text` if it names a known model or reads as a file (it exists, has a folder in it or ends in .gguf);
    anything else is most likely a mistyped name, a ConfigError naming the known ones."""
    if text in NAMES or os.sep in text or text.endswith(".gguf") or Path(text).expanduser().exists():
        return text
    raise ConfigError(f"no known model {text!r}; known models: {', '.join(NAMES)} (or give a path to a GGUF file)")
