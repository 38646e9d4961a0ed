"""Images of a ``/v1/rerank-images`` request: base64 or data URIs, or ``http(s)`` URLs where allowed.

The server never reads its own files for a client (a path or ``file://`` URL is refused); ``http(s)://``
URLs are fetched only with ``RequestLimits.allow_image_urls`` (off by default), with a timeout and a size
cap. Each image's declared size is checked before any pixel is decoded (:func:`check_declared_size`), then
it is decoded fully (``multimodal.images.load_image``), so a corrupt one is named by its index before any
model runs.

Example:
    >>> import asyncio
    >>> asyncio.run(decode_images(["not an image"], RequestLimits()))
    Traceback (most recent call last):
    ...
    llamaindex_posfair.serve.images.WireImageError: images[0] is not valid base64 ...
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Sequence
from typing import Any

from llamaindex_posfair.serve.config import RequestLimits


class WireImageError(ValueError):
    """An image of a request cannot be used; the message names it (``images[i]``)."""


def _base64_bytes(text: str, what: str, limits: RequestLimits) -> bytes:
    payload = text.split(",", 1)[1] if text.startswith("data:") else text
    if len(payload) > limits.max_image_bytes * 4 // 3 + 4:
        raise WireImageError(f"{what} is larger than the server's limit of {limits.max_image_bytes} bytes")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise WireImageError(
            f"{what} is not valid base64; send the image file's bytes base64-encoded (or a data: URI)"
        ) from None


async def _fetch(url: str, what: str, limits: RequestLimits) -> bytes:
    import httpx

    try:
        async with (
            httpx.AsyncClient(timeout=limits.image_url_timeout_s, follow_redirects=True) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code >= 400:
                raise WireImageError(f"{what}: fetching {url} answered HTTP {response.status_code}")
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data.extend(chunk)
                if len(data) > limits.max_image_bytes:
                    raise WireImageError(f"{what}: {url} is larger than the limit of {limits.max_image_bytes} bytes")
            return bytes(data)
    except httpx.HTTPError as exc:
        raise WireImageError(f"{what}: cannot fetch {url} ({type(exc).__name__})") from None


async def image_bytes(item: str, index: int, limits: RequestLimits) -> bytes:
    """The bytes of ``images[index]``.

    Raises:
        WireImageError: invalid base64, too large, a URL while URLs are off, a local path, a failed fetch.
    """
    what = f"images[{index}]"
    lowered = item[:16].lower()
    if lowered.startswith(("http://", "https://")):
        if not limits.allow_image_urls:
            raise WireImageError(
                f"{what} is a URL, and this server does not fetch URLs; send the image base64-encoded, or start "
                "the server with --allow-image-urls"
            )
        return await _fetch(item, what, limits)
    if lowered.startswith("file:") or item.startswith(("/", "./", "../", "~")):
        raise WireImageError(f"{what} looks like a file path; the server reads no local files, send base64")
    data = _base64_bytes(item, what, limits)
    if len(data) > limits.max_image_bytes:
        raise WireImageError(f"{what} is larger than the server's limit of {limits.max_image_bytes} bytes")
    return data


def check_declared_size(data: bytes, what: str, limits: RequestLimits) -> None:
    """Refuse an image whose header declares more than ``limits.max_image_pixels`` pixels (nothing decoded).

    Raises:
        WireImageError: over the limit (naming it and the flag that raises it), or a header PIL cannot read.
    """
    import warnings

    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:  # reads the header only
                width, height = image.size
    except Image.DecompressionBombError:  # over PIL's own cap (twice Image.MAX_IMAGE_PIXELS)
        width, height = 0, 2 * (Image.MAX_IMAGE_PIXELS or 0) + 1
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise WireImageError(
            f"{what} is not a readable image ({type(exc).__name__}); send a PNG, JPEG or WebP file"
        ) from None
    if (width or 1) * height > limits.max_image_pixels:
        size = f"{width} x {height}" if width else f"more than {height - 1}"
        raise WireImageError(
            f"{what} declares {size} pixels; this server decodes at most {limits.max_image_pixels} pixels per image "
            "(max_image_pixels, --max-image-pixels); send a smaller image"
        )


async def decode_images(items: Sequence[str], limits: RequestLimits) -> list[Any]:
    """Decoded RGB images of a request, in order (each one's declared size checked before it is decoded).

    Raises:
        WireImageError: the first image that cannot be used, by index.
    """
    from PIL import Image

    from llamaindex_posfair.multimodal.images import ImageLoadError, load_image

    out = []
    for i, item in enumerate(items):
        data = await image_bytes(item, i, limits)
        check_declared_size(data, f"images[{i}]", limits)
        try:
            out.append(load_image(data))
        except (ImageLoadError, Image.DecompressionBombError) as exc:
            raise WireImageError(f"images[{i}]: {exc}") from None
    return out
