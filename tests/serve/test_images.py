"""Images of a request: base64 decoded and checked; no local files; URLs only when allowed."""

from __future__ import annotations

import base64
import http.server
import io
import threading

import pytest
from PIL import Image

from llamaindex_posfair.serve.config import RequestLimits
from llamaindex_posfair.serve.images import WireImageError, decode_images


def png_bytes(colour=(200, 10, 10)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


B64 = base64.b64encode(png_bytes()).decode()


async def test_base64_and_data_uris_decode_to_the_same_pixels():
    a, b = await decode_images([B64, "data:image/png;base64," + B64], RequestLimits())
    assert a.getpixel((0, 0)) == b.getpixel((0, 0)) == (200, 10, 10)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("not base64 at all!", r"images\[1\] is not valid base64"),
        (base64.b64encode(b"\x89PNG garbage").decode(), r"images\[1\] is not a readable image"),
        ("/etc/passwd", r"images\[1\] looks like a file path"),
        ("file:///etc/passwd", r"images\[1\] looks like a file path"),
        ("https://example.com/cat.png", r"images\[1\] is a URL, and this server does not fetch URLs"),
    ],
)
async def test_unusable_images_are_named_by_index(item, message):
    with pytest.raises(WireImageError, match=message):
        await decode_images([B64, item], RequestLimits())


async def test_images_over_the_size_limit_are_refused():
    with pytest.raises(WireImageError, match=r"images\[0\] is larger than the server's limit of 10 bytes"):
        await decode_images([B64], RequestLimits(max_image_bytes=10))


@pytest.fixture
def image_url():
    body = png_bytes((10, 200, 10))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/img.png"
    server.shutdown()


async def test_urls_are_fetched_when_allowed(image_url):
    [img] = await decode_images([image_url], RequestLimits(allow_image_urls=True))
    assert img.getpixel((0, 0)) == (10, 200, 10)
