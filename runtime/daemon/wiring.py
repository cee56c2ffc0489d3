"""The parts of one agentd process, wired together from the settings."""

from __future__ import annotations

import os
from datetime import timedelta

from runtime.agent import plugins
from runtime.agent.loop import Runtime
from runtime.artifacts import ArtifactStore
from runtime.config import Settings
from runtime.harness.delegation import register_delegation
from runtime.harness.jobs import JobRunner, register_jobs
from runtime.inference.http import HttpModel
from runtime.inference.local import LocalModel
from runtime.inference.model import Model
from runtime.inference.model_file import resolve_model
from runtime.skills.tools import register_skill_tools
from runtime.tools.snapshot import Limit
from store import EventStore


def open_model(settings: Settings) -> Model:
    path = resolve_model(settings.model, settings.models_dir)
    if settings.model_url:
        # The endpoint runs the model; the local GGUF only lends its chat template and name.
        return HttpModel(
            settings.model_url, template_from=path, n_ctx=settings.n_ctx,
            connect_timeout_s=settings.model_connect_timeout_s, read_timeout_s=settings.model_read_timeout_s,
        )
    threads = settings.threads or min(4, os.cpu_count() or 1)
    return LocalModel(path, settings.n_ctx, kv_cache_bytes=settings.kv_cache_mb * 2**20, n_threads=threads)


def open_runtime(settings: Settings, store: EventStore, model: Model | None = None) -> Runtime:
    loaded = plugins.load(settings.plugins)
    artifacts = ArtifactStore(settings.artifacts_dir, settings.secrets, store.blobs)
    # Background jobs run in this process; only the daemon recovers the ones a crash orphaned.
    jobs = JobRunner(store, artifacts, settings.data_dir / "jobs")
    register_jobs(loaded.tools, jobs)
    register_skill_tools(loaded.tools)
    delegation = register_delegation(loaded.tools)
    runtime = Runtime(
        store=store,
        model=model or open_model(settings),
        tools=loaded.tools,
        profiles=loaded.profiles,
        artifacts=artifacts,
        protected=(settings.data_dir,),
        approval_ttl=timedelta(seconds=settings.approval_ttl_s),
        jobs=jobs,
        skill_roots=tuple(settings.skills_dirs),
        skills_budget_tokens=settings.skills_budget_tokens,
        record_limit=Limit(settings.record_max_files, settings.record_max_mb * 1024 * 1024),
        knowledge_index=settings.data_dir / "knowledge.db",
        rerankers=loaded.rerankers,
        evidence_weights=settings.evidence,
        memory_retention_days=dict(settings.memory_retention_days),
    )
    delegation.bind(runtime)
    if settings.mcp.servers:
        # Last, so that an MCP tool named like any tool agentd has, plugin and skill tools included, is refused.
        from runtime.mcp.gateway import Gateway

        runtime.mcp = Gateway(
            settings.mcp, log_dir=settings.data_dir / "logs", store=store, config_file=settings.origin("mcp")
        )
        try:
            runtime.mcp.open(loaded.tools)
        except BaseException:
            runtime.mcp.close()
            raise
    return runtime
