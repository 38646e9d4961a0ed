"""Rebuild the shipped DUMP training corpus: *As You Like It*, one file per scene.

Why this text: the shipped needle benchmark's passages come from all three of
the Canterbury prose texts (``alice29.txt``, ``plrabn12.txt``, ``lcet10.txt``;
its ``test`` split holds passages of every one of them), so none of those books
may be trained on. The same ``brotli`` 1.2.1 source distribution on PyPI ships
a fourth public-domain text of the Canterbury corpus, ``asyoulik.txt``
(Shakespeare, *As You Like It*), which no benchmark passage comes from. Get it::

    pip download --no-deps --no-binary :all: brotli==1.2.1 -d /tmp/brotli
    tar xzf /tmp/brotli/brotli-1.2.1.tar.gz -C /tmp/brotli

and rebuild::

    python scripts/build_dump_corpus.py /tmp/brotli/brotli-1.2.1/tests/testdata/asyoulik.txt \
        --out llamaindex_posfair/data/dump/as_you_like_it

Each scene (and the epilogue) becomes one document ``aNsM.txt``: the train/dev
split of ``posfair train-dump --corpus`` is by document, i.e. by scene. A speech
becomes one paragraph ``SPEAKER: text`` (hard-wrapped verse lines joined);
stage directions stay their own paragraphs; the list of characters is dropped.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

_ROMAN = {"I": 1, "II": 2, "III": 3, "IV": 4, "V": 5, "VI": 6, "VII": 7}
_ACT = re.compile(r"^ACT (I|II|III|IV|V)\s*$")
_SCENE = re.compile(r"^SCENE (I|II|III|IV|V|VI|VII)\b")


def split_scenes(raw: str) -> dict[str, list[str]]:
    """Scene name (``a1s1``, ..., ``epilogue``) -> its raw lines."""
    scenes: dict[str, list[str]] = {}
    act, current = 0, None
    for line in raw.splitlines():
        stripped = line.strip()
        if m := _ACT.match(stripped):
            act = _ROMAN[m.group(1)]
            continue
        if m := _SCENE.match(stripped):
            current = f"a{act}s{_ROMAN[m.group(1)]}"
            scenes[current] = []
            continue
        if stripped == "EPILOGUE":
            current = "epilogue"
            scenes[current] = []
            continue
        if current is not None and stripped != "AS YOU LIKE IT":
            scenes[current].append(line.rstrip())
    return scenes


def speeches(lines: list[str]) -> str:
    """Raw scene lines -> paragraphs: ``SPEAKER: joined text`` per speech, stage directions alone."""
    paragraphs: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for line in lines:
        if not line.strip():
            flush()
            continue
        if not line.startswith("\t") and "\t" in line:  # "SPEAKER\ttext"
            flush()
            speaker, _, text = line.partition("\t")
            current.append(f"{speaker.strip().title()}: {text.strip()}")
        else:
            current.append(line.strip())
    flush()
    return "\n\n".join(re.sub(r"\s+", " ", p).strip() for p in paragraphs if p.strip()) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="path of asyoulik.txt")
    parser.add_argument("--out", required=True, help="output folder (one .txt per scene)")
    args = parser.parse_args(argv)
    raw = Path(args.source).read_text(encoding="latin-1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scenes = split_scenes(raw)
    for name, lines in scenes.items():
        (out / f"{name}.txt").write_text(speeches(lines), encoding="utf-8")
    total = sum((out / f"{n}.txt").stat().st_size for n in scenes)
    print(f"wrote {len(scenes)} scenes ({total} bytes) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
