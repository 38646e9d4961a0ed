"""Load candidate images from local paths, ``file://`` URLs, base64 or bytes.

Remote URLs are refused on purpose (the reranker runs offline and must not
fetch); resolve them before reranking. Every image is decoded fully and
converted to RGB so a truncated or corrupt file fails here, with its source
named, instead of deep inside the model.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = ["ImageLoadError", "load_image", "load_node_image"]


_B64 = re.compile(r"[A-Za-z0-9+/\s]+={0,2}")


class ImageLoadError(ValueError):
    """An image could not be found or decoded."""


def _decode(data: bytes, what: str) -> Any:
    from PIL import Image, UnidentifiedImageError

    try:
        img = Image.open(io.BytesIO(data))
        img.load()
        return img.convert("RGB")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ImageLoadError(
            f"{what} is not a readable image ({type(exc).__name__}: {exc}); re-export or remove it"
        ) from exc


def _from_base64(text: str, what: str) -> Any:
    payload = text.split(",", 1)[1] if text.startswith("data:") else text
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageLoadError(f"{what} is not valid base64 ({exc})") from exc
    return _decode(data, what)


def load_image(source: Any) -> Any:
    """Return an RGB ``PIL.Image`` from ``source``.

    Args:
        source: a ``PIL.Image``, ``bytes``, a local path (``str``/``Path``), a
            ``file://`` URL, or a base64 string (optionally a ``data:`` URI).

    Returns:
        ``PIL.Image.Image`` in RGB mode.

    Raises:
        FileNotFoundError: the path does not exist.
        ImageLoadError: corrupt data, invalid base64, or a remote URL.

    Example:
        >>> from PIL import Image
        >>> load_image(Image.new("L", (4, 4))).mode
        'RGB'
    """
    from PIL import Image

    if isinstance(source, Image.Image):
        return source.convert("RGB")
    if isinstance(source, (bytes, bytearray)):
        return _decode(bytes(source), "image bytes")
    if isinstance(source, Path):
        return _load_path(source)
    if isinstance(source, str):
        if source.startswith("data:"):
            return _from_base64(source, "data URI")
        parsed = urlparse(source)
        if parsed.scheme == "file":
            return _load_path(Path(unquote(parsed.path)))
        if parsed.scheme in ("http", "https", "ftp", "s3", "gs"):
            raise ImageLoadError(
                f"remote image URL {source!r} is not fetched by the reranker; download it and pass a local path"
            )
        if len(source) < 4096 and Path(source).is_file():
            return _load_path(Path(source))
        if len(source) >= 64 and _B64.fullmatch(source):
            return _from_base64(source, "base64 image string")
        return _load_path(Path(source))
    raise ImageLoadError(
        f"cannot load an image from {type(source).__name__}; pass a path, base64 string, bytes or PIL image"
    )


def _load_path(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"image file {str(path)!r} does not exist; check the node's image_path")
    return _decode(path.read_bytes(), f"image file {str(path)!r}")


def load_node_image(node: Any) -> Any:
    """Load the image of a LlamaIndex ``ImageNode``: ``image`` (base64) > ``image_path`` > ``image_url``.

    Raises:
        ImageLoadError / FileNotFoundError: naming the node id.
    """
    node_id = getattr(node, "node_id", "?")
    for attr in ("image", "image_path", "image_url"):
        value = getattr(node, attr, None)
        if value:
            try:
                if attr == "image":  # LlamaIndex stores base64 here
                    return _from_base64(value, "the node's base64 image")
                if attr == "image_path":
                    return _load_path(Path(value))
                return load_image(value)
            except (ImageLoadError, FileNotFoundError) as exc:
                raise type(exc)(f"node {node_id}: {exc}") from exc
    raise ImageLoadError(
        f"node {node_id} has no image, image_path or image_url; only ImageNodes with an image can be reranked"
    )
