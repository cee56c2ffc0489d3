"""The artifact store: content-addressed, atomic, idempotent, and strict about the refs it accepts."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from runtime.artifacts import REF_PREFIX, ArtifactStore, is_ref, ref_for
from runtime.errors import NotFound
from store.errors import StoreError


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(tmp_path / "data" / "artifacts")


def test_put_stores_under_the_hash_and_get_returns_the_bytes(store: ArtifactStore) -> None:
    data = b"hello artifacts\n"
    digest = hashlib.sha256(data).hexdigest()

    ref = store.put(data)

    assert ref == f"artifact://sha256/{digest}" == ref_for(data)
    assert (store.root / digest[:2] / digest).read_bytes() == data
    assert store.get(ref) == data
    assert store.exists(ref)


def test_put_is_idempotent_and_leaves_no_temp_files(store: ArtifactStore) -> None:
    first = store.put(b"same")
    second = store.put(b"same")

    assert first == second
    assert [p.name for p in store.root.rglob("*") if p.is_file()] == [first.removeprefix(REF_PREFIX)]


def test_put_repairs_a_damaged_copy(store: ArtifactStore) -> None:
    ref = store.put(b"original")
    path = store.root / ref[-64:][:2] / ref[-64:]
    path.write_bytes(b"tampered")

    with pytest.raises(StoreError, match="damaged"):
        store.get(ref)
    assert store.put(b"original") == ref
    assert store.get(ref) == b"original"


@pytest.mark.parametrize(
    "ref",
    [
        "artifact://sha256/../../etc/passwd",
        "artifact://sha256/" + "A" * 64,
        "artifact://sha256/" + "a" * 63,
        "artifact://sha256/" + "a" * 64 + "\n",
        "artifact://sha256/" + "a" * 64 + "/../x",
        "file:///etc/passwd",
        "/etc/passwd",
        "",
    ],
)
def test_malformed_refs_name_nothing(store: ArtifactStore, ref: str) -> None:
    store.put(b"x")
    with pytest.raises(NotFound, match="not an artifact ref"):
        store.get(ref)
    assert not store.exists(ref)
    assert not is_ref(ref)


def test_a_well_formed_ref_that_was_never_put_is_not_found(store: ArtifactStore) -> None:
    ref = ref_for(b"never stored")
    assert not store.exists(ref)
    with pytest.raises(NotFound, match="does not exist"):
        store.get(ref)
