"""COCO-style image folders as labelled multi-image selection problems.

Folder layout: images plus a captions JSON, either COCO
(``{"images": [{"id", "file_name"}], "annotations": [{"image_id", "caption"}]}``)
or a plain list ``[{"image": "a.jpg", "caption": "..."}]``. Each problem is
one caption (the query), its image (the answer) and ``N − 1`` negatives:
``"random"`` images, or ``"hard"`` ones — the images whose captions share
the most words with the query (TF-IDF cosine; no model needed).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter
from pathlib import Path

from .images import load_image
from .types import Candidates

__all__ = ["build_problems", "load_captions"]


def load_captions(folder: str | Path, captions: str = "captions.json") -> list[tuple[Path, str]]:
    """``[(image_path, caption)]`` (first caption per image), sorted by file name.

    Raises:
        FileNotFoundError: if the folder or captions file is missing.
        ValueError: if the JSON has neither supported layout.
    """
    folder = Path(folder)
    path = folder / captions
    if not path.is_file():
        raise FileNotFoundError(f"captions file {str(path)!r} not found; pass --captions NAME for another file name")
    data = json.loads(path.read_text())
    pairs: dict[str, str] = {}
    if isinstance(data, dict) and "images" in data and "annotations" in data:
        names = {im["id"]: im["file_name"] for im in data["images"]}
        for a in data["annotations"]:
            pairs.setdefault(names[a["image_id"]], a["caption"])
    elif isinstance(data, list):
        for row in data:
            pairs.setdefault(row["image"], row["caption"])
    else:
        raise ValueError(f"{str(path)!r} must be COCO captions JSON or a list of {{'image', 'caption'}} rows")
    return [(folder / name, cap) for name, cap in sorted(pairs.items())]


def _tfidf(texts: list[str]) -> list[dict[str, float]]:
    docs = [Counter(re.findall(r"\w+", t.lower())) for t in texts]
    df = Counter(w for d in docs for w in d)
    n = len(docs)
    vecs = []
    for d in docs:
        v = {w: c * math.log((1 + n) / (1 + df[w])) for w, c in d.items()}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        vecs.append({w: x / norm for w, x in v.items()})
    return vecs


def build_problems(
    pairs: list[tuple[Path, str]], n: int, count: int, *, negatives: str = "random", seed: int = 0
) -> list[Candidates]:
    """``count`` labelled problems with ``n`` candidates (right image at a random slot).

    Raises:
        ValueError: if there are fewer than ``n`` images or ``negatives`` is unknown.
    """
    if negatives not in ("random", "hard"):
        raise ValueError(f"negatives must be 'random' or 'hard', got {negatives!r}")
    if len(pairs) < n:
        raise ValueError(f"need at least n={n} images, the folder has {len(pairs)}")
    rng = random.Random(seed)
    vecs = _tfidf([c for _, c in pairs]) if negatives == "hard" else None
    cache: dict[int, object] = {}

    def img(i: int):
        if i not in cache:
            cache[i] = load_image(pairs[i][0])
        return cache[i]

    out = []
    for q in [rng.randrange(len(pairs)) for _ in range(count)]:
        others = [i for i in range(len(pairs)) if i != q]
        if vecs is None:
            neg = rng.sample(others, n - 1)
        else:
            sim = lambda i, q=q: sum(x * vecs[i].get(w, 0.0) for w, x in vecs[q].items())  # noqa: E731
            neg = sorted(others, key=lambda i: (-sim(i), i))[: n - 1]
        answer = rng.randrange(n)
        order = list(neg)
        order.insert(answer, q)
        out.append(Candidates(pairs[q][1], tuple(img(i) for i in order), answer=answer))
    return out
