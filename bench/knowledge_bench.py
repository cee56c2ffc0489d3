"""What the knowledge base costs at 10,000 and 100,000 chunks. Figures only.

1. Ingest: documents added through `agentd knowledge add`'s path (an event and an artifact per
   document, the index caught up from the log), in chunks per second; then the index built again
   from the log alone (the index file deleted), in chunks per second.
2. Retrieval: a decision's candidates (BM25 within tenant and scope, 20 of them), and those plus the
   utility ranking and packing, median and p99 over queries of 3 to 8 words, for a tenant that may
   read half of the documents.

Documents are generated from a fixed seed: ten sections of about 40 words from a 2,000-word vocabulary,
two tenants, two scopes.

    .venv/bin/python bench/knowledge_bench.py [--sizes 10000 100000] [--queries 300]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SECTIONS = 10
WORDS = 40


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def write_documents(folder: Path, chunks: int, rng: random.Random, vocabulary: list[str]) -> list[Path]:
    paths = []
    for n in range(chunks // SECTIONS):
        tenant = "acme" if n % 2 == 0 else "globex"
        body = "\n\n".join(
            f"## Section {s}\n\n" + " ".join(rng.choices(vocabulary, k=WORDS)) for s in range(SECTIONS)
        )
        path = folder / f"doc-{n:06d}.md"
        path.write_text(f"---\nid: doc/{n}\nversion: v1\ntenants: {tenant}\n---\n# Doc {n}\n\n{body}\n")
        paths.append(path)
    return paths


def run(size: int, queries: int) -> None:
    from runtime.agent.request import injection_risk
    from runtime.evidence_weights import Weights

    weights = Weights()
    from runtime.artifacts import ArtifactStore
    from runtime.knowledge import evidence
    from runtime.knowledge.base import KnowledgeBase
    from store import EventStore

    rng = random.Random(size)
    vocabulary = [f"w{i:04d}" for i in range(2000)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        docs = root / "docs"
        docs.mkdir()
        paths = write_documents(docs, size, rng, vocabulary)
        store = EventStore(f"sqlite:///{root / 'agentd.db'}")
        artifacts = ArtifactStore(root / "artifacts")
        base = KnowledgeBase(store, artifacts, root / "knowledge.db")
        started = time.perf_counter()
        # In batches, as a user adds a folder at a time.
        for i in range(0, len(paths), 500):
            base.add_paths(paths[i : i + 500], tenants=None, scope=None, by="bench")
        ingest = time.perf_counter() - started
        docs_n, chunks_n = base.index.count()
        base.close()
        for f in root.glob("knowledge.db*"):
            f.unlink()
        rebuilt = KnowledgeBase(store, artifacts, root / "knowledge.db")
        started = time.perf_counter()
        rebuilt.catch_up()
        rebuild = time.perf_counter() - started

        asks = [" ".join(rng.sample(vocabulary, rng.randint(3, 8))) for _ in range(queries)]
        whole: list[float] = []
        candidates: list[float] = []
        for query in asks:
            started = time.perf_counter()
            found = rebuilt.candidates(query, tenant="acme", scopes=["general"])
            candidates.append(time.perf_counter() - started)
            evidence.retrieve(found, tenant="acme", query=query, exclude=set(), budget=weights.budget_tokens,
                              limit=weights.per_decision, count=lambda t: len(t) // 4,
                              min_utility=weights.min_utility, min_share=weights.min_share, risk=injection_risk,
                              weights=weights)
            whole.append(time.perf_counter() - started)
        rebuilt.close()
        store.close()
    med, p99 = quantiles(whole)
    med_c, p99_c = quantiles(candidates)
    print(f"{chunks_n:>7} chunks ({docs_n} documents)")
    print(f"  ingest through events   {chunks_n / ingest:>9.0f} chunks/s  ({ingest:.1f} s)")
    print(f"  index rebuilt from log  {chunks_n / rebuild:>9.0f} chunks/s  ({rebuild:.1f} s)")
    print(f"  candidates (BM25, 20)   median {med_c * 1000:7.2f} ms   p99 {p99_c * 1000:7.2f} ms")
    print(f"  retrieval, ranked       median {med * 1000:7.2f} ms   p99 {p99 * 1000:7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    for size in args.sizes:
        run(size, args.queries)


if __name__ == "__main__":
    main()
