"""Mixed-format folders for the reader tests: a small real PDF and Word document written by hand (no PDF or
Office library), an HTML page, Markdown, Python, JSON and a binary file."""

from __future__ import annotations

import io
import zipfile
from xml.sax.saxutils import escape


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def minimal_pdf(pages: list[list[str]]) -> bytes:
    """A valid PDF of ``len(pages)`` pages, each showing its lines of (ASCII) text.

    Example:
        >>> minimal_pdf([["hello"]])[:8]
        b'%PDF-1.4'
    """
    n = len(pages)
    font = 3 + 2 * n
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [{}] /Count {} >>".format(" ".join(f"{3 + 2 * i} 0 R" for i in range(n)), n),
    ]
    for i, lines in enumerate(pages):
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        ops += [f"({_escape(line)}) Tj T*" for line in lines]
        stream = "\n".join([*ops, "ET"])
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


_DOCX_PARTS = {
    "[Content_Types].xml": (
        '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
    ),
    "_rels/.rels": (
        '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
        'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        'relationships/officeDocument" Target="word/document.xml"/></Relationships>'
    ),
}


def minimal_docx(paragraphs: list[str]) -> bytes:
    """A valid Word document (``.docx``) of ``paragraphs``, one run of text each.

    Example:
        >>> minimal_docx(["hello"])[:2]
        b'PK'
    """
    body = "".join(f"<w:p><w:r><w:t>{escape(text)}</w:t></w:r></w:p>" for text in paragraphs)
    document = (
        '<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
        f'wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>'
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, xml in {**_DOCX_PARTS, "word/document.xml": document}.items():
            z.writestr(name, xml)
    return out.getvalue()


PDF_PAGES = [
    ["The tide tables of 1921 list the spring tides.", "Spring tides rise highest at the new moon."],
    ["Neap tides come at the quarter moons.", "The harbour master logs every neap tide."],
    ["Storm surges add to the tide in winter."],
]
HTML = (
    "<!DOCTYPE html><html><head><title>Honeybees</title><style>p { color: red; }</style></head>"
    "<body><h1>Honeybees</h1><p>A forager performs the <b>waggle dance</b> to point at nectar.</p>"
    "<script>var hidden = 'scriptnoise';</script><div><p>Drones</p><p>Queens</p></div></body></html>"
)
MARKDOWN = "# Sourdough\n\nFeed the starter with rye flour every morning.\n"
PYTHON = 'def knead(dough):\n    """Fold the dough twelve times."""\n    return dough * 12\n'


def make_mixed_folder(root):
    """A folder holding a three-page PDF, an HTML page, a Markdown file, a .py file in ``code/`` and a binary file.

    Returns:
        ``root`` (a ``pathlib.Path``).
    """
    (root / "code").mkdir(parents=True)
    (root / "tides.pdf").write_bytes(minimal_pdf(PDF_PAGES))
    (root / "bees.html").write_text(HTML)
    (root / "bread.md").write_text(MARKDOWN)
    (root / "code" / "knead.py").write_text(PYTHON)
    (root / "blob.txt").write_bytes(b"\x00\x01\x02binary")
    return root


LIGHTHOUSE_JSON = (
    '{"lighthouse": "Fastnet Rock", "lamp": "The Fastnet lamp shows one white flash every five seconds.", '
    '"range_nautical_miles": 27}\n'
)


DOCX_PARAGRAPHS = [
    "Garden notes",
    "Tomato seedlings are hardened off outdoors for ten days before planting.",
    "Basil is sown in late spring.",
]


def make_package_folder(root):
    """A folder holding a two-page PDF, a Word document, an HTML page, Markdown, a Python package (an empty
    ``__init__.py`` and a module) in ``kitchen/`` and a JSON file; no binary file.

    Returns:
        ``root`` (a ``pathlib.Path``).
    """
    (root / "kitchen").mkdir(parents=True)
    (root / "tides.pdf").write_bytes(minimal_pdf(PDF_PAGES[:2]))
    (root / "garden.docx").write_bytes(minimal_docx(DOCX_PARAGRAPHS))
    (root / "bees.html").write_text(HTML)
    (root / "bread.md").write_text(MARKDOWN)
    (root / "kitchen" / "__init__.py").write_text("")
    (root / "kitchen" / "knead.py").write_text(PYTHON)
    (root / "lighthouse.json").write_text(LIGHTHOUSE_JSON)
    return root
