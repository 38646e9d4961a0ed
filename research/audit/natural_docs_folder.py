"""Write the shipped natural-docs corpus as a folder of documents, and a split's questions as audit questions.

``posfair audit`` reads documents from a folder, as a user's would be; this writes the benchmark's 901
passages as ``p0000.txt`` ... (one passage, one file) and the split's hand-written questions as JSON Lines
rows ``{query, answer, doc, group}`` for ``--questions`` (``group`` is the benchmark's own label: the third
of the passage, by whitespace words, that wholly holds the answer).

Usage::

    python research/audit/natural_docs_folder.py /tmp/natural-docs --split test [--distractors 80]
    posfair audit /tmp/natural-docs/docs --questions /tmp/natural-docs/questions-test.jsonl \\
        --kinds extractive,question --out-dir research/results/audit/natural-docs-test
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def write(out: Path, split: str, distractors: int | None = None) -> tuple[int, int]:
    """Write ``out/docs/*.txt`` and ``out/questions-<split>.jsonl``; returns (documents, questions).

    ``distractors``: keep the split's target passages and only the first N others (by id); ``None``: all 901.
    """
    from research.eval.benchmarks.loaders import shipped_path

    folder = Path(shipped_path("natural-docs")) / split
    rows = []
    with gzip.open(folder / "queries.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            rows.append({"query": q["text"], "answer": q["answer"], "doc": q["doc_id"], "group": q["group"]})
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        corpus = {str(r["_id"]): r["text"] for r in map(json.loads, fh)}
    targets = {r["doc"] for r in rows}
    kept = sorted(targets) + [d for d in sorted(corpus) if d not in targets][:distractors]
    docs = out / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for doc_id in kept:
        (docs / f"{doc_id}.txt").write_text(corpus[doc_id], encoding="utf-8")
    n_docs = len(kept)
    (out / f"questions-{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return n_docs, len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="folder to write docs/ and questions-<split>.jsonl into")
    parser.add_argument("--split", choices=("dev", "test"), default="test")
    parser.add_argument(
        "--distractors", type=int, default=None, help="keep only the first N non-target passages (default: all)"
    )
    args = parser.parse_args(argv)
    n_docs, n_questions = write(Path(args.out), args.split, args.distractors)
    print(f"{n_docs} documents in {args.out}/docs, {n_questions} questions in {args.out}/questions-{args.split}.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
