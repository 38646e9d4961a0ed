"""Rebuild the shipped ``natural-docs`` benchmark from ``natural.jsonl`` (natural-docs-posq v1).

``natural.jsonl`` holds one meta line, 901 passages (Python Language Reference
and Vim 9.0 documentation prose) and 240 hand-written questions with a ``dev`` or
``test`` split, a position group and one relevant passage each. This script
writes it in the shape of ``needle_prose`` (read by ``load_needle``)::

    python scripts/build_natural_data.py /work/shared/benchmarks/natural/natural.jsonl

writes ``llamaindex_posfair/data/benchmarks/natural_docs/{dev,test}/{corpus,queries}.jsonl.gz``
and ``info.json`` (``README.md`` and ``LICENSE.md`` there are written by hand). Add
``--check`` to rebuild into memory and compare byte for byte with the shipped files
instead (exit status 1 on any difference).

Each split's corpus is **all 901 passages** (the benchmark scores every split
against its whole corpus; its splits partition the 99 documents that hold a
target, while 42 documents hold none and belong to no split: see the shipped
README). Files are gzip-compressed with ``mtime=0``, so rebuilds are
byte-identical.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "llamaindex_posfair" / "data" / "benchmarks" / "natural_docs"
SPLITS = ("dev", "test")
GROUPS = ("begin", "middle", "end")


def read_natural(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """``(meta, passages, queries)`` of ``natural.jsonl``, after checking its text hash and counts."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    meta = rows[0]
    if meta.get("type") != "meta" or meta.get("name") != "natural-docs-posq":
        raise ValueError(f"{path}: the first line must be the natural-docs-posq meta record, got {str(meta)[:80]!r}")
    passages = [r for r in rows if r["type"] == "passage"]
    queries = [r for r in rows if r["type"] == "query"]
    digest = hashlib.sha256()
    for p in passages:
        digest.update(p["text"].encode("utf-8"))
    if digest.hexdigest() != meta["corpus_sha256_texts"]:
        raise ValueError(f"{path}: passage texts do not match the meta's corpus_sha256_texts; the file was changed")
    if len(passages) != meta["n_passages"] or len(queries) != meta["n_queries"]:
        raise ValueError(f"{path}: {len(passages)} passages / {len(queries)} queries, the meta says otherwise")
    return meta, passages, queries


def corpus_rows(passages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"_id": p["id"], "text": p["text"], "source": p["source"]} for p in passages]


def query_rows(queries: list[dict[str, Any]], source_of: dict[str, str], split: str) -> list[dict[str, Any]]:
    """The split's queries in ``load_needle``'s fields; ``rel_position`` is the answer's midpoint (words)."""
    out = []
    for q in queries:
        if q["split"] != split:
            continue
        out.append(
            {
                "_id": q["id"],
                "text": q["text"],
                "doc_id": q["relevant_id"],
                "group": q["group"],
                "rel_position": round((q["rel_pos"] + q["rel_pos_end"]) / 2, 4),
                "rel_pos": q["rel_pos"],
                "rel_pos_end": q["rel_pos_end"],
                "answer": q["answer"],
                "answer_start": q["answer_start"],
                "answer_end": q["answer_end"],
                "source": source_of[q["relevant_id"]],
            }
        )
    return out


def jsonl_gz(rows: list[dict[str, Any]], name: str) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=buf, mtime=0) as fh:  # mtime=0: byte-identical rebuilds
        for r in rows:
            fh.write((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8"))
    return buf.getvalue()


def info(meta: dict[str, Any], file_sha256: str, splits: dict[str, dict[str, int]]) -> dict[str, Any]:
    return {
        "name": "natural-docs",
        "groups": list(GROUPS),
        "splits": splits,
        "corpus": "every split is scored against all passages (the benchmark's corpus); splits hold the queries",
        "protocol": meta["protocol"],
        "relevance": meta["relevance"],
        "group_rule": meta["group_rule"],
        "upstream": {
            "name": meta["name"],
            "version": meta["version"],
            "file": "natural.jsonl",
            "sha256": file_sha256,
            "corpus_sha256_texts": meta["corpus_sha256_texts"],
        },
        "sources": meta["sources"],
        "passage_tokens_max": meta["max_tokens_all_minilm_l6_v2"],
        "tokenizer": "sentence-transformers/all-MiniLM-L6-v2 ([CLS] and [SEP] included)",
        "words_per_passage": meta["words_per_passage"],
        "licence": "see LICENSE.md in this folder",
    }


def build(path: Path) -> dict[str, bytes]:
    """Relative path -> file bytes of the shipped benchmark."""
    meta, passages, queries = read_natural(path)
    source_of = {p["id"]: p["source"] for p in passages}
    corpus = corpus_rows(passages)
    files: dict[str, bytes] = {}
    splits: dict[str, dict[str, int]] = {}
    for split in SPLITS:
        rows = query_rows(queries, source_of, split)
        files[f"{split}/corpus.jsonl.gz"] = jsonl_gz(corpus, "corpus.jsonl")
        files[f"{split}/queries.jsonl.gz"] = jsonl_gz(rows, "queries.jsonl")
        splits[split] = {
            "passages": len(corpus),
            "queries": len(rows),
            "target_documents": len({r["source"] for r in rows}),
        }
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    files["info.json"] = (json.dumps(info(meta, sha, splits), indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("natural_jsonl", type=Path, help="natural.jsonl of natural-docs-posq v1")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT})")
    parser.add_argument("--check", action="store_true", help="compare with the files in --out; write nothing")
    args = parser.parse_args(argv)
    try:
        files = build(args.natural_jsonl)
    except (OSError, ValueError, KeyError) as exc:
        print(f"build_natural_data: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        differ = [
            rel
            for rel, data in files.items()
            if not (args.out / rel).is_file() or (args.out / rel).read_bytes() != data
        ]
        for rel in differ:
            print(f"differs: {args.out / rel}")
        print("identical" if not differ else f"{len(differ)} of {len(files)} files differ")
        return 1 if differ else 0
    for rel, data in files.items():
        target = args.out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        print(f"wrote {target} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
