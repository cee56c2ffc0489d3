"""The knowledge base: documents added as events, their text kept by hash, their chunks in an FTS5 index.

`agentd knowledge add` and a profile's knowledge folder both come here. Adding a document records
DocumentAdded (its id, version, tenants, scope, authority and the sha256 of its text, which goes to
the artifact store); the index is derived from those events and caught up before every search, so a
document added by another process, or changed in a profile's folder, is found at the next decision,
not after a restart. Adding the same text again adds nothing; other text under the same id is a new
version, and the one before stays citable but superseded. A few-shot example (examples.py) is added
the same way, as kind `example`, and kept apart from the documents in the index.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime import logs
from runtime.artifacts import REF_PREFIX, ArtifactStore
from runtime.errors import InvalidCommand
from runtime.knowledge import evidence, examples
from runtime.secrets.patterns import redacted
from store.events import KNOWLEDGE_STREAM, DocumentAdded
from store.knowledge import KnowledgeIndex, Placed

# The kinds of file a folder's documents are read from.
SUFFIXES = (".md", ".markdown", ".txt")
# How many chunks BM25 hands to the utility ranking (the design's 10 to 20).
CANDIDATES = 20
# The scope of a document added without one, and of every profile's tasks.
GENERAL = "general"
KINDS = ("document", "example")
# The subfolder of a profile's knowledge folder whose files are examples unless they say otherwise.
EXAMPLES_FOLDER = "examples"
log = logs.get_logger("agentd.knowledge")
_NAME = re.compile(r"^[a-z0-9][a-z0-9:_.-]{0,99}$")


class BadDocument(InvalidCommand):
    """A document named to be added cannot be: bad input, so it exits 2 as click's usage errors do."""

    exit_code = 2


@dataclass(frozen=True)
class Added:
    doc_id: str
    version: str
    chunks: int
    new: bool  # False: the same text was there already, nothing was recorded
    kind: str = "document"


def folder_scope(folder: Path) -> str:
    """The scope of a knowledge folder's documents: the folder's, read by every profile that names it. (A
    scope per profile set two profiles sharing a folder against each other: the second's sync found the
    same text already added, in the first one's scope, and its tasks were shown nothing.)"""
    path = str(folder.resolve())
    # A scope is a short lowercase name (store.events.DocumentAdded): the folder's own name, to read, and
    # a hash of its whole path, to tell two folders of that name apart.
    name = re.sub(r"[^a-z0-9_.-]+", "-", folder.resolve().name.lower()).strip("-.")[:40] or "root"
    return f"folder:{name}-{hashlib.sha256(path.encode()).hexdigest()[:10]}"


class KnowledgeBase:
    def __init__(self, store, artifacts: ArtifactStore, index: Path | None = None) -> None:
        self.store = store
        self.artifacts = artifacts
        # Without a file (a runtime of tests and tools), the index is built in memory from the log.
        self.index = KnowledgeIndex(index if index is not None else ":memory:")
        # (mtime_ns, size) of each folder file as last synced: an unchanged folder costs one stat a file.
        self._seen: dict[Path, tuple[int, int]] = {}

    def close(self) -> None:
        self.index.close()

    # -- adding ----------------------------------------------------------------------------------------

    def add_paths(
        self, paths: Iterable[Path], *, tenants: Sequence[str] | None, scope: str | None, by: str,
        authority: float | None = None, kind: str | None = None,
    ) -> list[Added]:
        """Every document file among `paths` (folders read recursively), checked whole before any is added;
        `kind`, where given, stands over each one's front matter."""
        if kind is not None and kind not in KINDS:
            raise BadDocument(f"kind {kind!r}: one of {', '.join(KINDS)}")
        files: list[Path] = []
        for p in paths:
            if p.is_dir():
                files += sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in SUFFIXES)
            elif p.is_file():
                files.append(p)
            else:
                raise BadDocument(f"{p}: no such file or folder")
        if not files:
            raise BadDocument("no documents to add (.md, .markdown or .txt files)")
        docs = [_read(f) for f in files]
        for tenant in tenants or ():
            _check_name("tenant", tenant, allow_all=True)
        if scope is not None:
            _check_name("scope", scope)
        if authority is not None and not 0.0 <= authority <= 1.0:
            raise BadDocument(f"authority {authority}: a number from 0 to 1")
        return self._add(docs, tenants=tenants, scope=scope, default_scope=GENERAL, authority=authority, by=by,
                         kind=kind)

    def sync(self, folder: Path, *, scope: str, by: str = "agentd") -> None:
        """A profile's knowledge folder into the base: each file new or changed since it was last seen, those
        in its `examples` subfolder as examples unless their front matter says otherwise."""
        if not folder.is_dir():
            return
        changed: dict[Path, tuple[int, int]] = {}
        for f in sorted(folder.rglob("*")):
            if f.is_file() and f.suffix.lower() in SUFFIXES:
                st = f.stat()
                if self._seen.get(f) != (st.st_mtime_ns, st.st_size):
                    changed[f] = (st.st_mtime_ns, st.st_size)
        # A document that cannot be added (not UTF-8, an authority that is no number) is logged and left
        # out, as an unreadable skill is: one bad file must not take the folder's evidence from every task.
        for f, seen in changed.items():
            try:
                self._add([_read(f)], tenants=None, scope=None, default_scope=scope, authority=None, by=by,
                          default_kind="example" if EXAMPLES_FOLDER in f.relative_to(folder).parts[:-1] else
                          "document")
            except InvalidCommand as e:
                log.warning("knowledge document left out", path=str(f), error=str(e))
            self._seen[f] = seen

    def _add(
        self, docs: Sequence[_Document], *, tenants: Sequence[str] | None, scope: str | None, default_scope: str,
        authority: float | None, by: str, kind: str | None = None, default_kind: str = "document",
    ) -> list[Added]:
        """Documents, all checked before any is recorded, then recorded in one append; `tenants`, `scope`,
        `authority` and `kind`, where given, stand over each one's front matter."""
        self.catch_up()
        # Versions of this batch, by document id: a folder may hold the same id twice.
        pending: dict[str, list[Placed]] = {}
        events: list[tuple[DocumentAdded, bytes]] = []
        added: list[Added] = []
        for doc in docs:
            meta = doc.meta
            doc_id = meta.get("id") or doc.path.stem
            what = kind or meta.get("kind") or default_kind
            if what not in KINDS:
                raise BadDocument(f"{doc.path}: kind {what!r}: one of {', '.join(KINDS)}")
            if what == "example":
                if not meta.get("policy_version"):
                    raise BadDocument(f"{doc.path}: an example names the policy_version it is valid for")
                if problem := examples.problem(doc.text):
                    raise BadDocument(f"{doc.path}: {problem}")
            versions = self.index.versions(doc_id) | {p.version for p in pending.get(doc_id, [])}
            latest = pending[doc_id][-1] if doc_id in pending else self.index.latest(doc_id)
            who = tuple(tenants) if tenants else tuple(
                t.strip() for t in meta.get("tenants", "*").split(",") if t.strip()
            ) or ("*",)
            where = scope or meta.get("scope") or default_scope
            # The same text in the same place adds nothing; the same text placed elsewhere (another scope,
            # other tenants) is a new version there, as a user re-adding it to move it means.
            if latest is not None and (latest.sha256, latest.kind, latest.scope, latest.tenants) == (
                doc.sha256, what, where, who
            ):
                chunks = _chunks(what, doc_id, latest.version, doc.text, meta.get("decision"))
                added.append(Added(doc_id, latest.version, len(chunks), new=False, kind=what))
                continue
            version = meta.get("version") or meta.get("effective") or f"v{len(versions) + 1}"
            if version in versions:
                # The text changed and its front matter did not: a version of its own all the same.
                version = f"{version}+{doc.sha256[:8]}"
            try:
                weight = authority if authority is not None else float(meta.get("authority", "1.0"))
            except ValueError:
                given = meta["authority"]
                raise BadDocument(f"{doc.path}: authority {given!r} is not a number from 0 to 1") from None
            try:
                event = DocumentAdded(
                    doc_id=doc_id, version=version, sha256=doc.sha256, source=str(doc.path), tenants=who,
                    scope=where, authority=weight,
                    supersedes=tuple(v.strip() for v in meta.get("supersedes", "").split(",") if v.strip()),
                    kind=what,
                    **({"policy_version": meta["policy_version"], "decision": meta.get("decision") or None}
                       if what == "example" else {}),
                )
            except ValueError as e:
                raise BadDocument(f"{doc.path}: {_first_error(e)}") from None
            pending.setdefault(doc_id, []).append(Placed(version, doc.sha256, what, where, who))
            events.append((event, doc.raw))
            chunks = _chunks(what, doc_id, version, doc.text, event.decision)
            added.append(Added(doc_id, version, len(chunks), new=True, kind=what))
        if events:
            # The texts first, flushed once: an event never names a text the store does not hold.
            for _, raw in events:
                self.artifacts.put(raw, sync=False)
            self.artifacts.flush()
            self.store.append(KNOWLEDGE_STREAM, [e for e, _ in events], actor=by)
            self.catch_up()
        return added

    # -- the index, from the log -----------------------------------------------------------------------

    def catch_up(self) -> None:
        """Apply the DocumentAdded events the index does not hold yet (all of them, for a new index)."""
        head = self.store.stream_version(KNOWLEDGE_STREAM)
        version, seq = self.index.applied()
        if head == version:
            return
        if head < version:
            # The index is of another log (a data folder restored from a copy): built again from this one.
            self.index.clear()
            seq = 0
        for rec in self.store.read_stream(KNOWLEDGE_STREAM, after=seq):
            e = rec.event
            if not isinstance(e, DocumentAdded):
                self.index.skip(rec.stream_version, rec.seq)
                continue
            text = evidence.front_matter(self.artifacts.get(REF_PREFIX + e.sha256).decode("utf-8"))[1]
            # The artifact keeps a document with a secret sealed; the index, its chunks and every decision
            # shown them hold only `[redacted:KIND]`: no task's vault owns a document's secret to put back.
            text = redacted(text, self.artifacts.secrets.patterns)[0]
            self.index.add(
                seq=rec.seq, stream_version=rec.stream_version, doc_id=e.doc_id, version=e.version,
                sha256=e.sha256, tenants=e.tenants, scope=e.scope, authority=e.authority, supersedes=e.supersedes,
                chunks=_chunks(e.kind, e.doc_id, e.version, text, e.decision), kind=e.kind,
                policy_version=e.policy_version, decision=e.decision,
            )

    # -- retrieval -------------------------------------------------------------------------------------

    def candidates(
        self, query: str, *, tenant: str, scopes: Sequence[str], limit: int = CANDIDATES
    ) -> list[evidence.Section]:
        """The chunks BM25 ranks best for `query` among those `tenant` may read in `scopes`, as sections
        for the utility ranking. Out-of-scope chunks are filtered by the index's query, never here."""
        self.catch_up()
        found = self.index.candidates(evidence.terms(query), tenant=tenant, scopes=scopes, limit=limit)
        return [
            evidence.Section(
                cite=c.cite, doc_id=c.doc_id, version=c.version, title=c.title, text=c.text,
                tenants=frozenset(c.tenants), authority=c.authority, current=c.current, scope=c.scope,
            )
            for c in found
        ]

    def examples(
        self, query: str, *, tenant: str, scopes: Sequence[str], limit: int = CANDIDATES
    ) -> list[examples.Example]:
        """The examples BM25 ranks best for `query` among those `tenant` may read in `scopes`, of any policy
        version: which of them a decision may be shown is `examples.select`'s to say, and to record."""
        self.catch_up()
        found = self.index.candidates(evidence.terms(query), tenant=tenant, scopes=scopes, limit=limit, kind="example")
        return [
            examples.Example(
                cite=c.cite, doc_id=c.doc_id, version=c.version, policy_version=c.policy_version or "",
                decision=c.decision, text=c.text, tenants=frozenset(c.tenants), current=c.current,
            )
            for c in found
        ]


def _chunks(kind: str, doc_id: str, version: str, text: str, decision: str | None):
    if kind == "example":
        return examples.chunks_of(doc_id, version, text, decision)
    return evidence.chunks_of(doc_id, version, text)


@dataclass(frozen=True)
class _Document:
    path: Path
    raw: bytes
    sha256: str
    meta: dict[str, str]
    text: str


def _read(path: Path) -> _Document:
    try:
        raw = path.read_bytes()
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadDocument(f"{path}: not UTF-8 text") from None
    except OSError as e:
        raise BadDocument(f"{path}: {e.strerror}") from None
    if problem := evidence.front_matter_problem(decoded):
        raise BadDocument(f"{path}: {problem}")
    meta, text = evidence.front_matter(decoded)
    return _Document(path, raw, hashlib.sha256(raw).hexdigest(), meta, text)


def _check_name(what: str, value: str, *, allow_all: bool = False) -> None:
    if not (_NAME.match(value) or (allow_all and value == "*")):
        raise BadDocument(f"{what} {value!r}: lowercase letters, digits, ':', '.', '_' and '-'")


def _first_error(e: ValueError) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):
        first = errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(e)
