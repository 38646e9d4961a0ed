import uuid

from qdrant_tools.ids import document_version, point_id


def test_point_id_is_deterministic_uuid():
    a = point_id("a.md", "v1", 3)
    assert a == point_id("a.md", "v1", 3)
    assert str(uuid.UUID(a)) == a


def test_point_id_differs_by_doc_version_and_index():
    ids = {point_id("a.md", "v1", 0), point_id("b.md", "v1", 0), point_id("a.md", "v2", 0), point_id("a.md", "v1", 1)}
    assert len(ids) == 4


def test_point_id_is_pinned():
    # ids must never move between releases (and must match any other ingestion path)
    assert point_id("a.md", "v1", 0) == str(
        uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_URL, "https://llamaindex-posfair/qdrant-point-id/v1"), "a.md\nv1\n0")
    )


def test_version_changes_with_content_chunking_and_fingerprint():
    base = document_version("h", "c", {"calibrated": "f"})
    assert base == document_version("h", "c", {"calibrated": "f"})
    assert (
        len(
            {
                base,
                document_version("h2", "c", {"calibrated": "f"}),
                document_version("h", "c2", {"calibrated": "f"}),
                document_version("h", "c", {"calibrated": "g"}),
                document_version("h", "c", {"vanilla": "f"}),
            }
        )
        == 5
    )


def test_version_ignores_fingerprint_order():
    assert document_version("h", "c", {"a": "1", "b": "2"}) == document_version("h", "c", {"b": "2", "a": "1"})
