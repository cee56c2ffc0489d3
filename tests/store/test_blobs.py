"""The database's blob table: artifact bytes every host serving the database can read."""

from __future__ import annotations

import hashlib

import pytest

from store import EventStore
from store.blobs import BlobTable
from tests.helpers.postgres import fresh_schema, unreachable

_WHY = unreachable()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, db_url: str):
    if request.param == "sqlite":
        EventStore(db_url).close()
        yield db_url
        return
    if _WHY is not None:
        pytest.skip(_WHY)
    for pg in fresh_schema():
        EventStore(pg).close()
        yield pg


def test_a_blob_put_by_one_connection_is_read_by_another_and_a_second_put_changes_nothing(url: str) -> None:
    data = b"\x00binary\xffbytes\n" * 100
    digest = hashlib.sha256(data).hexdigest()
    writer, reader = BlobTable(url), BlobTable(url)
    try:
        assert reader.get(digest) is None and not reader.has(digest)
        writer.put(digest, data)
        writer.put(digest, data)  # another host putting the same artifact
        assert reader.get(digest) == data and reader.has(digest)
    finally:
        writer.close()
        reader.close()


def test_a_store_on_a_server_has_a_blob_table_and_a_sqlite_file_none(url: str) -> None:
    with EventStore(url) as store:
        assert (store.blobs is None) == url.startswith("sqlite")
