"""The generated documents keep the sections a partial run did not rewrite."""

from __future__ import annotations

from pathlib import Path

from benchmarks.document import read_sections, stamp, write_document

ORDER = ["benchmarks.a", "benchmarks.b", "benchmarks.c"]


def test_a_partial_run_rewrites_only_its_sections(tmp_path: Path) -> None:
    doc = tmp_path / "bench.md"
    write_document(doc, "# Bench", {"benchmarks.b": "## B\n\nold b", "benchmarks.a": "## A"}, ORDER)
    write_document(doc, "# Bench again", {"benchmarks.b": stamp("## B\n\nnew b", "cmd b")}, ORDER)

    text = doc.read_text()
    assert text.startswith("# Bench again\n")
    sections = read_sections(doc)
    assert list(sections) == ["benchmarks.a", "benchmarks.b"]  # in ORDER, not in write order
    assert sections["benchmarks.a"] == "## A"
    assert sections["benchmarks.b"].startswith("## B\n\nnew b\n\n_Written by `cmd b` on ")
    assert "old b" not in text


def test_a_document_without_markers_is_replaced(tmp_path: Path) -> None:
    doc = tmp_path / "bench.md"
    doc.write_text("# Old\n\n## Something hand-written\n")
    assert read_sections(doc) == {}
    write_document(doc, "# New", {"benchmarks.c": "## C"}, ORDER)
    assert read_sections(doc) == {"benchmarks.c": "## C"}
