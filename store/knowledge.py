"""The knowledge index: the knowledge base's chunks in SQLite FTS5, searched within a tenant and scopes.

Derived from the log's DocumentAdded events (and the texts they name), so it lives in its own database
file beside the event store and is built again whenever it is behind the log, of another version, or
lost. Tenant and scope are columns of the same FTS5 table and filtered in the query that ranks: a
chunk another tenant may see, or of a scope the caller lacks, is never among the candidates, so it
cannot be scored, selected, dropped or listed anywhere.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from store.fulltext import Transaction

# Bumped whenever SCHEMA, or what goes into it, changes: the index is derived, so one of another version
# is built again (3: a document's secrets are indexed as `[redacted:KIND]`).
VERSION = 3
SCHEMA = """
CREATE TABLE IF NOT EXISTS applied (
    id INTEGER PRIMARY KEY CHECK (id = 1), stream_version INTEGER NOT NULL, seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT NOT NULL, version TEXT NOT NULL, seq INTEGER NOT NULL, sha256 TEXT NOT NULL, tenants TEXT NOT NULL,
    scope TEXT NOT NULL, authority REAL NOT NULL, superseded INTEGER NOT NULL DEFAULT 0, chunks INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT 'document', policy_version TEXT, decision TEXT,
    PRIMARY KEY (doc_id, version)
);
-- The same tokenizer as the workspace's content index: case and accents folded, English stems.
-- tenants is ',acme,globex,' so that one instr() finds a whole name; scope is one name. kind keeps
-- examples and documents apart in the query, so neither takes the other's places among the candidates.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING fts5(
    cite UNINDEXED, doc_id UNINDEXED, version UNINDEXED, title, text, tenants UNINDEXED, scope UNINDEXED,
    kind UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


@dataclass(frozen=True)
class Placed:
    """A document version: its text, and where it is found (scope and tenants)."""

    version: str
    sha256: str
    kind: str
    scope: str
    tenants: tuple[str, ...]


@dataclass(frozen=True)
class Chunk:
    cite: str
    title: str
    text: str


@dataclass(frozen=True)
class Document:
    doc_id: str
    version: str
    seq: int
    tenants: tuple[str, ...]
    scope: str
    authority: float
    current: bool
    chunks: int
    kind: str = "document"
    policy_version: str | None = None


@dataclass(frozen=True)
class Candidate:
    cite: str
    doc_id: str
    version: str
    title: str
    text: str
    tenants: tuple[str, ...]
    scope: str
    authority: float
    current: bool
    bm25: float  # higher is better
    policy_version: str | None = None
    decision: str | None = None


class KnowledgeIndex:
    def __init__(self, path: Path | str) -> None:
        if isinstance(path, Path):
            path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # Derived data: a crash costs a rebuild from the log, never a fact, so no fsync per commit; WAL
        # lets a decision search while another process catches the index up.
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=OFF")
        self._conn.execute("PRAGMA busy_timeout=5000")
        if self._conn.execute("PRAGMA user_version").fetchone()[0] != VERSION:
            self.clear()

    def close(self) -> None:
        self._conn.close()

    def clear(self) -> None:
        self._conn.executescript(
            f"DROP TABLE IF EXISTS chunks; DROP TABLE IF EXISTS documents; DROP TABLE IF EXISTS applied; {SCHEMA}"
            f"INSERT INTO applied VALUES (1, 0, 0); PRAGMA user_version = {VERSION};"
        )

    def applied(self) -> tuple[int, int]:
        """The version of the knowledge stream the index holds everything of, and that event's seq."""
        return self._conn.execute("SELECT stream_version, seq FROM applied").fetchone()

    def add(
        self, *, seq: int, stream_version: int, doc_id: str, version: str, sha256: str, tenants: Sequence[str],
        scope: str, authority: float, supersedes: Sequence[str], chunks: Sequence[Chunk], kind: str = "document",
        policy_version: str | None = None, decision: str | None = None,
    ) -> None:
        """One document version's chunks; every older version of the document, and those it names, superseded."""
        with Transaction(self._conn):
            self._conn.execute(
                "UPDATE documents SET superseded = 1 WHERE doc_id = ? AND (seq < ? OR version IN (SELECT value "
                "FROM json_each(?)))", (doc_id, seq, json.dumps(list(supersedes))),
            )
            # doc_id is not an indexed column of chunks: deleting by it scans every chunk, so only when a
            # version is indexed again (a rebuild over a half-applied index), never per added document.
            key = (doc_id, version)
            if self._conn.execute("SELECT 1 FROM documents WHERE doc_id = ? AND version = ?", key).fetchone():
                self._conn.execute("DELETE FROM chunks WHERE doc_id = ? AND version = ?", key)
            who = "," + ",".join(tenants) + ","
            self._conn.execute(
                "INSERT OR REPLACE INTO documents (doc_id, version, seq, sha256, tenants, scope, authority, chunks, "
                "kind, policy_version, decision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (doc_id, version, seq, sha256, who, scope, authority, len(chunks), kind, policy_version, decision),
            )
            self._conn.executemany(
                "INSERT INTO chunks (cite, doc_id, version, title, text, tenants, scope, kind) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(c.cite, doc_id, version, c.title, c.text, who, scope, kind) for c in chunks],
            )
            self._conn.execute("UPDATE applied SET stream_version = ?, seq = ?", (stream_version, seq))

    def skip(self, stream_version: int, seq: int) -> None:
        """Mark an event of the stream that adds nothing to the index as applied."""
        self._conn.execute("UPDATE applied SET stream_version = ?, seq = ?", (stream_version, seq))

    def latest(self, doc_id: str) -> Placed | None:
        """The newest version of `doc_id`: its text's sha256, kind, scope and tenants; None if there is none."""
        row = self._conn.execute(
            "SELECT version, sha256, kind, scope, tenants FROM documents WHERE doc_id = ? ORDER BY seq DESC LIMIT 1",
            (doc_id,),
        ).fetchone()
        return Placed(row[0], row[1], row[2], row[3], tuple(t for t in row[4].split(",") if t)) if row else None

    def versions(self, doc_id: str) -> set[str]:
        return {v for (v,) in self._conn.execute("SELECT version FROM documents WHERE doc_id = ?", (doc_id,))}

    def candidates(
        self, words: Sequence[str], *, tenant: str, scopes: Sequence[str], limit: int, kind: str = "document"
    ) -> list[Candidate]:
        """The best `limit` chunks of `kind` holding any of `words` that `tenant` may read in one of `scopes`,
        best first."""
        terms = [w for w in words if w]
        if not terms or not scopes:
            return []
        # Each word quoted: FTS5 then reads it as a term, never as an operator or a column filter.
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in terms)
        marks = ", ".join("?" for _ in scopes)
        rows = self._conn.execute(
            "SELECT c.cite, c.doc_id, c.version, c.title, c.text, c.tenants, c.scope, d.authority, d.superseded, "
            "c.score, d.policy_version, d.decision FROM (SELECT cite, doc_id, version, title, text, tenants, scope, "
            "bm25(chunks) AS score FROM chunks WHERE chunks MATCH ? AND kind = ? "
            "AND (instr(tenants, ?) > 0 OR instr(tenants, ',*,') > 0) "
            f"AND scope IN ({marks}) ORDER BY score, cite LIMIT ?) AS c "
            "JOIN documents AS d ON d.doc_id = c.doc_id AND d.version = c.version ORDER BY c.score, c.cite",
            (match, kind, f",{tenant},", *scopes, limit),
        )
        return [
            Candidate(cite, doc_id, version, title, text, tuple(t for t in tenants.split(",") if t), scope,
                      authority, not superseded, -score, policy_version, decision)
            for cite, doc_id, version, title, text, tenants, scope, authority, superseded, score, policy_version,
            decision in rows
        ]

    def documents(self) -> list[Document]:
        """Every version of every document, oldest first."""
        rows = self._conn.execute(
            "SELECT doc_id, version, seq, tenants, scope, authority, superseded, chunks, kind, policy_version "
            "FROM documents ORDER BY seq"
        )
        return [
            Document(doc_id, version, seq, tuple(t for t in tenants.split(",") if t), scope, authority,
                     not superseded, chunks, kind, policy_version)
            for doc_id, version, seq, tenants, scope, authority, superseded, chunks, kind, policy_version in rows
        ]

    def count(self) -> tuple[int, int]:
        """Documents (versions) and chunks held."""
        docs = self._conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        chunks = self._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return docs, chunks
