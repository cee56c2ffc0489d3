"""Plugins: Python files that add tools and profiles (the worked example is one), loaded by path.

A plugin file defines `register(tools, profiles)`, or `register(tools, profiles, rerankers)`; it may add
tools to the registry, profiles to the mapping, and rerankers by name (a profile's `reranker` names one).
Plugins are code and run with agentd's rights: load only files you trust.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from runtime.agent.profiles import WORKSPACE, Profile
from runtime.errors import ConfigError
from runtime.knowledge.evidence import Reranker
from runtime.tools import ToolRegistry, builtin_tools


@dataclass
class Plugins:
    tools: ToolRegistry
    profiles: dict[str, Profile] = field(default_factory=dict)
    rerankers: dict[str, Reranker] = field(default_factory=dict)


def load(paths: Iterable[Path]) -> Plugins:
    loaded = Plugins(ToolRegistry(builtin_tools()), {WORKSPACE.name: WORKSPACE})
    for path in paths:
        module = _import(Path(path))
        register = getattr(module, "register", None)
        if not callable(register):
            raise ConfigError(f"plugin {path} defines no register(tools, profiles) function")
        if len(inspect.signature(register).parameters) >= 3:
            register(loaded.tools, loaded.profiles, loaded.rerankers)
        else:
            register(loaded.tools, loaded.profiles)
    for profile in loaded.profiles.values():
        if profile.reranker is not None and profile.reranker not in loaded.rerankers:
            known = ", ".join(sorted(loaded.rerankers)) or "none"
            raise ConfigError(
                f"profile {profile.name!r} names reranker {profile.reranker!r}, which no plugin registers "
                f"(registered: {known})"
            )
    return loaded


def _import(path: Path):
    if not path.is_file():
        raise ConfigError(f"plugin {path} does not exist")
    name = f"agentd_plugin_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"plugin {path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001  a broken plugin is a configuration problem, said in one line
        raise ConfigError(f"plugin {path} failed to load: {type(e).__name__}: {e}") from e
    return module
