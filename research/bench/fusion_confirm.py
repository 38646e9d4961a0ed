"""Confirm one fusion on fresh dev data: DBSF against the shipped weighted RRF, then report test.

The fusion sweep (``research/bench/fusion_sweep.py``, results in ``research/results/fusion_sweep/``) kept
the shipped search by its rule, while DBSF was far ahead on both needle dev splits and 0.3 behind on
natural-docs dev. This script tests that one hypothesis on data no rule has seen.

The rule, fixed before the run (it is printed with the results):

    DBSF ("node 0.5 + BM25, DBSF") replaces the shipped search ("shipped: node 0.5 + BM25 x1.5, RRF k=60")
    as the default if and only if all of these hold on the dev data below:
    1. on each of the two fresh needle sets, DBSF's harmonic nDCG@10 is above the shipped search's, and on
       at least one of them the paired 95% bootstrap interval of the difference lies wholly above 0;
    2. on docs-identifiers dev and on natural-docs dev, the lower end of the paired 95% interval of
       DBSF - shipped is above -2.0 points (non-inferiority);
    3. DBSF's PSI is <= 0.05 on both fresh needle sets and on natural-docs dev.
    Otherwise the shipped search stays.

The dev data:

* ``needle-manuals-fresh``: the builder and settings of ``needle-manuals`` (people, things and places as
  facts; distractor passages with four near-duplicate facts per template), seed 31, one split, built from
  ten Info manuals that ``needle-manuals`` does not use (gnupg, gzip, bzip2, time, bc, find-maint,
  libtasn1, autosprintf, gpgrt, libffi, as Debian 12 installs them under ``/usr/share/info``). 230
  passages (50 distractors), 180 queries.
* ``needle-prose-fresh``: the builder and settings of ``needle-prose``, seed 31, one split, from its three
  Gutenberg texts plus *As You Like It* (``asyoulik.txt``, the same brotli test data). New names, facts,
  positions and windows; the filler comes from largely the same books, so its passages share text with
  ``needle-prose``'s. 180 passages, 180 queries.
* ``docs-identifiers`` dev (``research/identifiers.py``): scored by no earlier rule.
* ``natural-docs`` dev: the earlier sweep scored it (DBSF 84.5, shipped 84.8). No fresh natural questions
  exist, so it enters only as a non-inferiority bound.

Neither fresh set is shipped; both are built into ``--fresh`` (the commands are in ``FRESH``). Every row
is the shipped layout in the embedded Qdrant Edge store, queried in one ``query_points`` call; the
LlamaIndex peers are scored in the same run on every set. Test splits are reported after the decision,
for the record: they choose nothing.

Usage:
    pip download --no-deps --no-binary :all: brotli==1.2.1 -d /tmp/brotli
    tar xzf /tmp/brotli/brotli-1.2.1.tar.gz -C /tmp/brotli
    python research/bench/fusion_confirm.py --fresh /tmp/fresh --gutenberg /tmp/brotli/brotli-1.2.1/tests/testdata
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from research.bench.fusion_sweep import GRID, report_test, score, table

SHIPPED = GRID[0].label
CANDIDATE = "node 0.5 + BM25, DBSF"
PSI_MAX = 0.05
NON_INFERIORITY = -0.02  # -2.0 points of harmonic nDCG@10
INFO = "/usr/share/info"
MANUALS = ("gzip", "bzip2", "time", "bc", "find-maint", "libtasn1", "autosprintf", "gpgrt", "libffi")
FRESH: dict[str, list[str]] = {
    "needle-manuals-fresh": [
        "--format=texinfo",
        "--facts=mixed",
        "--per-group=60",
        "--distractors=50",
        "--hard-negatives=4",
        f"--source=gnupg={INFO}/gnupg.info-*.gz",
        *(f"--source={m}={INFO}/{m}.info.gz" for m in MANUALS),
    ],
    "needle-prose-fresh": [
        "--per-group=60",
        "--source=alice={gutenberg}/alice29.txt",
        "--source=paradise_lost={gutenberg}/plrabn12.txt@Book I",
        "--source=loc_workshop={gutenberg}/lcet10.txt@Acknowledgements",
        "--source=as_you_like_it={gutenberg}/asyoulik.txt",
    ],
}
TEST = ("natural-docs", "needle-prose", "needle-manuals", "docs-identifiers")


def build_fresh(folder: Path, gutenberg: str | None) -> dict[str, Path]:
    """Each fresh set's folder under ``folder``, built by ``scripts/build_needle_benchmark.py`` if missing."""
    root = Path(__file__).resolve().parents[2]
    out = {}
    for name, args in FRESH.items():
        target = folder / name.replace("-", "_")
        if not (target / "info.json").exists():
            if "{gutenberg}" in " ".join(args) and gutenberg is None:
                raise SystemExit(f"{name} needs --gutenberg (the brotli test data folder; see Usage)")
            cmd = [sys.executable, str(root / "scripts/build_needle_benchmark.py"), f"--name={name}"]
            cmd += ["--seed=31", "--splits=fresh", f"--out={target}"]
            cmd += [a.replace("{gutenberg}", gutenberg or "") for a in args]
            subprocess.run(cmd, check=True)
        out[name] = target
    return out


def dev_sets(fresh: dict[str, Path]) -> dict[str, Any]:
    """Name -> the loaded dev data of the rule."""
    from research.eval.benchmarks.loaders import load_needle
    from research.identifiers import load

    sets = {name: load_needle(path, "fresh") for name, path in fresh.items()}
    sets["docs-identifiers"] = load("docs-identifiers", "dev")
    sets["natural-docs"] = load("natural-docs", "dev")
    return sets


def decide(dev: dict[str, list[Any]], sets: dict[str, Any]) -> tuple[str, list[str]]:
    """The rule of the module docstring: the chosen label and one line per condition."""
    from llamaindex_posfair.eval.metrics import bootstrap_harmonic_diff

    def diff(name: str) -> tuple[float, float, float]:
        rows = {r.name: r for r, _ in dev[name]}
        return bootstrap_harmonic_diff(rows[CANDIDATE].per_query, rows[SHIPPED].per_query, sets[name].groups)

    def psi(name: str) -> float:
        return next(r for r, _ in dev[name] if r.name == CANDIDATE).ndcg.psi

    fresh = list(FRESH)
    d = {name: diff(name) for name in dev}
    one = all(d[n][0] > 0 for n in fresh) and any(d[n][1] > 0 for n in fresh)
    two = all(d[n][1] > NON_INFERIORITY for n in ("docs-identifiers", "natural-docs"))
    three = all(psi(n) <= PSI_MAX for n in (*fresh, "natural-docs"))
    lines = [f"- {n}: DBSF - shipped {100 * v:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]" for n, (v, lo, hi) in d.items()]
    lines += [f"- DBSF PSI: {', '.join(f'{n} {psi(n):.3f}' for n in (*fresh, 'natural-docs'))}"]
    lines += [f"- condition 1 (ahead on the fresh needles): {one}", f"- condition 2 (non-inferior): {two}"]
    lines += [f"- condition 3 (PSI <= {PSI_MAX}): {three}"]
    return (CANDIDATE if one and two and three else SHIPPED), lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", required=True, help="folder of the fresh needle sets (built there if missing)")
    parser.add_argument("--gutenberg", default=None, help="the brotli test data folder (to build needle-prose-fresh)")
    parser.add_argument("--memo", default=None, help="folder of the embedding memo (reused between runs)")
    args = parser.parse_args(argv)
    import logging

    from llamaindex_posfair.integrations.recipe import Recipe
    from research.default_pipeline.peers import bundled_minilm_embedding, llamaindex_peers
    from research.default_pipeline.system import cpu_load
    from research.eval.memo import MemoEncoder, VectorMemo

    logging.getLogger("qdrant_tools").setLevel(logging.WARNING)
    t0 = time.perf_counter()
    sets = dev_sets(build_fresh(Path(args.fresh), args.gutenberg))
    spec = Recipe.default().encoder_spec()
    encoder = MemoEncoder(spec.load(), VectorMemo(args.memo) if args.memo else VectorMemo())
    hf_embed = bundled_minilm_embedding(device="cpu")

    def peers_for() -> list[Any]:
        return llamaindex_peers(hf_embed, top_k=100)

    print("The rule" + __doc__.split("The dev data")[0].split("The rule", 1)[1].rstrip())
    print(f"\nencoder: {spec.model_dump(exclude_defaults=True)}")
    dev = {}
    for name, bench in sets.items():
        dev[name] = score(name, "dev", encoder, peers_for(), [SHIPPED, CANDIDATE], bench=bench)
        shipped = next(r for r, _ in dev[name] if r.name == SHIPPED)
        print(table(f"{name} (dev data)", dev[name], bench, {"Δ vs shipped [95% CI]": shipped.per_query}), flush=True)
    chosen, lines = decide(dev, sets)
    print("\n" + "\n".join(lines))
    print(f"\nchosen on dev: {chosen}")
    report_test(encoder, peers_for, CANDIDATE, TEST)
    print(f"\nwall {time.perf_counter() - t0:.0f} s; load averages at the end {cpu_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
