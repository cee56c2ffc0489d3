"""Evidence: versioned Markdown documents, retrieved within the caller's scope and packed by utility.

A document is a Markdown file whose front matter names its id, version and scope:

    ---
    id: runbook/api-keys
    version: v7
    tenants: acme, globex        (or * for everyone)
    authority: 1.0               (policy 1.0, how-to 0.7, forum post 0.3)
    supersedes: v6               (optional; a superseded version scores low on freshness)
    ---

Each `##` section is one candidate (a long one cut at paragraph boundaries), cited as
`<id>@<version>#<anchor>`. Scope is a filter applied before anything is scored, so another tenant's
text is never a candidate, not even a rejected one. Pure: text in, sections and rankings out; the
knowledge base (base.py) keeps the documents and their index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from runtime.errors import ConfigError
from runtime.evidence_weights import DEFAULT as DEFAULT_WEIGHTS, Weights
from store.knowledge import Chunk

# A section longer than this many words is cut at paragraph boundaries: one chunk should be one thing
# a decision can use, and the evidence budget is spent in whole chunks.
CHUNK_WORDS = 220
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by for from how i in is it my not of on or the this to was what why with you your".split()
)


@dataclass(frozen=True)
class Section:
    cite: str
    doc_id: str
    version: str
    title: str
    text: str
    tenants: frozenset[str]
    authority: float
    current: bool
    # The permission scope the knowledge base keeps it in; empty for a section from elsewhere (MCP).
    scope: str = ""

    def allowed_for(self, tenant: str) -> bool:
        return "*" in self.tenants or tenant in self.tenants


@dataclass(frozen=True)
class Scored:
    section: Section
    utility: float
    tokens: int
    # The factors of the utility that are not the section's own (authority is): for the record.
    relevance: float = 0.0
    freshness: float = 1.0


@dataclass(frozen=True)
class Packed:
    selected: tuple[Scored, ...]
    left_out: tuple[tuple[Scored, str], ...]
    budget: int
    used: int


def load_folder(folder: Path) -> list[Section]:
    """Every chunk of every document in `folder` (recursively), in a stable order, read straight from the
    files as the knowledge base would chunk them: for checking a folder without a data folder."""
    if not folder.is_dir():
        return []
    docs = []
    for path in sorted(folder.rglob("*.md")):
        meta, body = front_matter(path.read_text(encoding="utf-8"))
        docs.append((meta.get("id", path.stem), meta.get("version", "v1"), meta, body))
    superseded = {(doc_id, v.strip()) for doc_id, _, meta, _ in docs for v in meta.get("supersedes", "").split(",")}
    return [
        Section(
            cite=c.cite, doc_id=doc_id, version=version, title=c.title, text=c.text,
            tenants=frozenset(t.strip() for t in meta.get("tenants", "*").split(",") if t.strip()),
            authority=float(meta.get("authority", "1.0")), current=(doc_id, version) not in superseded,
        )
        for doc_id, version, meta, body in docs
        for c in chunks_of(doc_id, version, body)
    ]


def document_sections(
    doc_id: str, version: str, title: str, text: str, tenants: frozenset[str], authority: float
) -> list[Section]:
    """A document from elsewhere (an MCP server's resource or prompt) as candidates: one per `##`
    section, or the whole text under its title when it has none."""
    parts = split_sections(text) or [(anchor_of(title), title, text.strip())]
    return [
        Section(cite=f"{doc_id}@{version}#{anchor}", doc_id=doc_id, version=version, title=heading, text=body,
                tenants=tenants, authority=authority, current=True)
        for anchor, heading, body in parts
        if body
    ]


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """A document's front matter (`key: value` lines between `---` lines) and the text after it."""
    meta: dict[str, str] = {}
    if text.startswith("---\n"):
        head, sep, rest = text[4:].partition("\n---\n")
        if sep:
            for line in head.splitlines():
                key, colon, value = line.partition(":")
                if colon:
                    meta[key.strip()] = value.strip()
            text = rest
    return meta, text


_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*\s*:")


def front_matter_problem(text: str) -> str | None:
    """What is wrong with a document's front matter, or None. One never closed, or with a line that is
    no `key: value`, would be read as text or skipped, and a tenant or policy version in it lost unsaid."""
    if not text.startswith("---\n"):
        return None
    head, sep, _ = text[4:].partition("\n---\n")
    if not sep:
        return "its front matter opens with --- and is never closed by another"
    for n, line in enumerate(head.splitlines(), start=2):
        if line.strip() and not line.lstrip().startswith("#") and not _KEY.match(line):
            return f"front matter line {n} is not `key: value`: {line.strip()[:40]!r}"
    return None


def chunks_of(doc_id: str, version: str, text: str) -> list[Chunk]:
    """A document's chunks: one per `##` section (the whole text under its first line when it has
    none), a long section cut at paragraph boundaries into parts of about CHUNK_WORDS words."""
    sections = split_sections(text)
    if not sections:
        title = next((line.lstrip("# ").strip() for line in text.splitlines() if line.strip()), doc_id)
        sections = [(anchor_of(title), title, text.strip())]
    chunks: list[Chunk] = []
    for anchor, title, body in sections:
        if not body:
            continue
        for n, part in enumerate(_parts(body), start=1):
            chunks.append(Chunk(f"{doc_id}@{version}#{anchor if n == 1 else f'{anchor}-{n}'}", title, part))
    return chunks


def _parts(body: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    words = 0
    for paragraph in re.split(r"\n\s*\n", body):
        n = len(paragraph.split())
        if current and words + n > CHUNK_WORDS:
            parts.append("\n\n".join(current))
            current, words = [], 0
        current.append(paragraph.strip())
        words += n
    if current:
        parts.append("\n\n".join(current))
    return [p for p in parts if p]


def split_sections(text: str) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    title, lines = None, []
    for line in text.splitlines():
        if line.startswith("## "):
            if title is not None:
                out.append((anchor_of(title), title, "\n".join(lines).strip()))
            title, lines = line[3:].strip(), []
        elif title is not None:
            lines.append(line)
    if title is not None:
        out.append((anchor_of(title), title, "\n".join(lines).strip()))
    return out


def anchor_of(title: str) -> str:
    return "-".join(_WORD.findall(title.lower())) or "section"


def terms(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def relevance(query: Iterable[str], section: Section) -> float:
    """Share of the query's distinct terms the section mentions, title matches counting double; 0..1."""
    wanted = set(query)
    if not wanted:
        return 0.0
    body = set(terms(section.text))
    title = set(terms(section.title))
    hits = sum(2.0 if t in title else 1.0 for t in wanted if t in body or t in title)
    return min(1.0, hits / len(wanted))


# A second stage a plugin may add (a dense model, a cross-encoder): given the query and the candidates
# BM25 found within scope, each one's relevance, 0..1, in place of term overlap. Authority, freshness,
# redundancy and injection risk still apply, so a reranker reorders what may be shown, never widens it.
Reranker = Callable[[str, Sequence[Section]], Sequence[float]]


def reranked(rerank: Reranker, query: str, sections: Sequence[Section]) -> list[float]:
    """The reranker's relevances, checked: one number in 0..1 per candidate, or the reranker is broken."""
    if not sections:
        return []
    scores = [float(x) for x in rerank(query, sections)]
    if len(scores) != len(sections) or not all(0.0 <= x <= 1.0 for x in scores):
        raise ConfigError(
            f"the reranker gave {len(scores)} relevances for {len(sections)} candidates; it must give one in 0..1 "
            "for each"
        )
    return scores


def retrieve(
    sections: Iterable[Section],
    *,
    tenant: str,
    query: str,
    exclude: set[str],
    budget: int,
    limit: int,
    count: Callable[[str], int],
    min_utility: float = 0.0,
    min_share: float = 0.0,
    risk: Callable[[Section], float] = lambda s: 0.0,
    rerank: Reranker | None = None,
    weights: Weights = DEFAULT_WEIGHTS,
) -> Packed:
    """Authorize, score, pack: utility = relevance x authority x freshness - redundancy - injection risk
    (seed 000). `risk` is what a section's instruction-like text costs it: still only data if shown.

    A superseded version is both stale (freshness `weights.stale_freshness`, 0.2 by default) and
    redundant with its successor (`stale_penalty`), so by default it scores at or below zero and stays
    out however large the budget. A second section of a document already chosen pays a small
    redundancy penalty, so one document cannot fill the budget on its own.

    `min_share` leaves out a section that scores under that share of the best match for the query,
    shown before or not: a weak match is a distraction next to a strong one, however much room is left.
    """
    q = terms(query)
    allowed = [s for s in sections if s.allowed_for(tenant)]
    relevant = reranked(rerank, query, allowed) if rerank is not None else [relevance(q, s) for s in allowed]

    def freshness(s: Section) -> float:
        return 1.0 if s.current else weights.stale_freshness

    def base(s: Section, rel: float) -> float:
        return rel * s.authority * freshness(s) - (0.0 if s.current else weights.stale_penalty) - risk(s)

    scored = [(base(s, rel), s, rel) for s, rel in zip(allowed, relevant, strict=True)]
    floor = max(min_utility, min_share * max((b for b, _, _ in scored), default=0.0))
    ranked = sorted((p for p in scored if p[1].cite not in exclude), key=lambda p: (-p[0], p[1].cite))
    selected: list[Scored] = []
    left_out: list[tuple[Scored, str]] = []
    chosen_docs: set[str] = set()
    used = 0
    for b, s, rel in ranked:
        utility = round(b - (weights.redundancy if s.doc_id in chosen_docs else 0.0), 4)
        c = Scored(s, utility, count(s.text), round(rel, 4), freshness(s))
        if utility <= 0:
            left_out.append((c, "not useful for this decision (utility <= 0)"))
        elif utility < floor:
            left_out.append((c, f"too little use for this decision (utility {utility} < {round(floor, 4)})"))
        elif len(selected) >= limit:
            left_out.append((c, f"ranked below the top {limit}"))
        elif used + c.tokens > budget:
            left_out.append((c, f"over the evidence budget ({used} + {c.tokens} > {budget} tokens)"))
        else:
            selected.append(c)
            chosen_docs.add(s.doc_id)
            used += c.tokens
    return Packed(tuple(selected), tuple(left_out), budget, used)
