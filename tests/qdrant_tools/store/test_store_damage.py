"""A damaged store: every failure names the file and the fix, and ``check_collection`` finds it without writing."""

from __future__ import annotations

import os

import pytest

from qdrant_tools.store import StorageDamagedError, open_store
from qdrant_tools.store.check import check_collection, vector_problem
from qdrant_tools.store.errors import is_file_failure
from tests.qdrant_tools.store.damage import COLLECTION, contents, make_store, overwrite, segment

FIX = ("backup copy", "posfair snapshot restore", "posfair ingest", "posfair storage check c")


@pytest.fixture
def root(tmp_path):
    return make_store(tmp_path / "s")


def read_everything(root):
    with open_store(root) as store:
        store.scroll(COLLECTION, limit=1000, with_payload=True, with_vectors=True)


def checked(root):
    """``check_collection``'s report, asserting that the check changed no file."""
    before = contents(root)
    report = check_collection(root, COLLECTION, page_size=16)
    assert contents(root) == before
    return report


def assert_names_fix(message):
    for part in FIX:
        assert part in message, part


def test_a_clean_store_checks_clean_and_unchanged(root):
    report = checked(root)
    assert report.clean and (report.points, report.vectors, report.counted) == (60, 120, 60)
    assert report.summary().endswith("no damage found")


def test_a_broken_collection_json_names_the_file_and_the_fix(root):
    path = root / "collections" / COLLECTION / "collection.json"
    path.write_text("{'vectors': 1}")
    with open_store(root) as store, pytest.raises(StorageDamagedError) as info:
        store.count(COLLECTION)
    assert str(path) in str(info.value) and "Expecting property name" in str(info.value)
    assert info.value.path == path
    assert_names_fix(str(info.value))
    report = checked(root)
    assert list(report.files) == [str(path)] and report.points == 60  # the points still read


def test_a_collection_json_of_the_wrong_shape_is_named(root):
    path = root / "collections" / COLLECTION / "collection.json"
    path.write_text('{"vectors": "node"}')
    with open_store(root) as store, pytest.raises(StorageDamagedError, match="invalid field"):
        store.count(COLLECTION)


def test_a_deleted_store_json_says_so_and_how_to_write_it_again(root):
    os.remove(root / "store.json")
    with pytest.raises(StorageDamagedError) as info:
        open_store(root)
    message = str(info.value)
    assert f"{root / 'store.json'} is missing" in message and "is not an embedded Qdrant store" not in message
    assert '{"engine": "qdrant-edge", "format": 1}' in message and "'c'" in message
    report = checked(root)
    assert list(report.files) == [str(root / "store.json")] and report.points == 60


def test_local_mode_does_not_write_into_a_store_without_store_json(root):
    os.remove(root / "store.json")
    with pytest.raises(StorageDamagedError, match="store.json is missing"):
        open_store(root, engine="local")
    assert not (root / "meta.json").exists()


def test_an_unreadable_store_json_is_named(root):
    (root / "store.json").write_text("{")
    with pytest.raises(StorageDamagedError, match=f"{root / 'store.json'} cannot be read"):
        open_store(root)


def test_an_overwritten_payload_page_names_the_payload_storage_and_the_points(root):
    payloads = segment(root) / "payload_storage"
    overwrite(payloads / "page_0.dat", 0, b"\xff" * 200)
    with pytest.raises(StorageDamagedError) as info:
        read_everything(root)
    assert info.value.path == payloads and str(payloads) in str(info.value)
    assert_names_fix(str(info.value))
    report = checked(root)
    assert not report.clean and report.files.keys() == {str(payloads)}
    assert 1 <= len(report.damaged_points) < 60 and report.points == 60 - len(report.damaged_points)
    assert all(p.startswith("payload:") for p in report.damaged_points.values())


def test_a_truncated_payload_page_is_found_point_by_point(root):
    page = segment(root) / "payload_storage" / "page_0.dat"
    os.truncate(page, 3000)
    report = checked(root)
    assert report.files.keys() == {str(page.parent)} and len(report.damaged_points) > 1
    assert "DAMAGED" in report.summary() and "points" in report.summary()


def test_a_truncated_vector_file_names_it(root):
    vectors = segment(root) / "vector_storage-node"
    os.truncate(vectors / "vectors" / "chunk_0.mmap", 100)
    with pytest.raises(StorageDamagedError) as info:
        read_everything(root)
    # Edge names the vector's folder, or only the bounds it crossed: then every vector storage of the segment
    assert info.value.path in (vectors / "vectors", segment(root) / "vector_storage-*")
    assert str(info.value.path) in str(info.value)
    report = checked(root)
    assert report.files.keys() == {str(vectors)}
    assert report.damaged_points and all(p.startswith("vector 'node'") for p in report.damaged_points.values())


def test_vectors_overwritten_with_nan_or_noise_are_found(root):
    chunk = segment(root) / "vector_storage-node" / "vectors" / "chunk_0.mmap"
    overwrite(chunk, 0, b"\xff" * 64)  # the first two vectors: NaN
    overwrite(chunk, 8 * 4 * 5, b"\x3f" * 32)  # the sixth: finite floats, no longer of length 1
    report = checked(root)
    problems = sorted(report.damaged_points.values())
    assert len(problems) == 3 and sum("NaN" in p for p in problems) == 2
    assert sum("cosine vector of length" in p for p in problems) == 1
    assert report.files.keys() == {str(segment(root) / "vector_storage-node")}


def test_an_overwritten_multivector_offset_file_names_the_vector(root):
    overwrite(segment(root) / "vector_storage-subchunks" / "offsets" / "chunk_0.mmap", 0, b"\xff" * 40)
    report = checked(root)
    assert report.files.keys() == {str(segment(root) / "vector_storage-subchunks")}
    assert all(p.startswith("vector 'subchunks'") for p in report.damaged_points.values())


def test_a_broken_segment_state_names_the_file(root):
    path = segment(root) / "segment.json"
    overwrite(path, 0, b"x" * 10)
    with pytest.raises(StorageDamagedError, match="cannot open collection 'c'") as info:
        read_everything(root)
    assert str(segment(root)) in str(info.value)
    report = checked(root)
    assert str(path) in report.files and report.points == 0


def test_a_broken_write_ahead_log_names_it(root):
    wal = root / "collections" / COLLECTION / "shard" / "wal"
    overwrite(next(wal.glob("open-*")), 0, b"\xff" * 500)
    with pytest.raises(StorageDamagedError) as info:
        read_everything(root)
    assert info.value.path == wal
    assert checked(root).files.keys() == {str(wal)}


def test_a_record_without_its_shard_and_a_shard_without_its_record_are_named(root, tmp_path):
    os.remove(root / "collections" / COLLECTION / "collection.json")
    with open_store(root) as store, pytest.raises(StorageDamagedError, match="collection.json is missing"):
        store.count(COLLECTION)


def test_a_wrong_request_is_not_mistaken_for_damage(root):
    with open_store(root) as store, pytest.raises(Exception, match="Vector dimension error") as info:
        store.query_points(COLLECTION, query=[0.1] * 5, using="node")
    assert not isinstance(info.value, StorageDamagedError) and not is_file_failure(info.value)


def test_the_check_refuses_a_store_this_process_has_open(root):
    from qdrant_tools.store import StoreLockedError

    with open_store(root), pytest.raises(StoreLockedError, match="this process has the store"):
        check_collection(root, COLLECTION)


def test_the_check_names_a_missing_collection(root):
    with pytest.raises(ValueError, match=r"no collection 'x'.*existing: \['c'\]"):
        check_collection(root, "x")


def test_vector_problem_accepts_zero_and_unit_cosine_vectors():
    from qdrant_client import models

    cosine = models.VectorParams(size=2, distance=models.Distance.COSINE)
    assert vector_problem([0.0, 0.0], cosine) is None and vector_problem([[0.6, 0.8], [1.0, 0.0]], cosine) is None
    assert "length 2" in vector_problem([2.0, 0.0], cosine)
    assert vector_problem([2.0, 0.0], models.VectorParams(size=2, distance=models.Distance.DOT)) is None
