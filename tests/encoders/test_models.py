"""The default-model name lives in a module light enough for CLI defaults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_default_model_name_imports_without_torch():
    code = (
        "import sys\n"
        "from llamaindex_posfair.encoders.models import BUNDLED_MINILM\n"
        "import llamaindex_posfair\n"
        "assert llamaindex_posfair.BUNDLED_MINILM == BUNDLED_MINILM\n"
        "print(BUNDLED_MINILM, 'torch' in sys.modules)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert res.stdout.split() == ["bundled:all-MiniLM-L6-v2", "False"]
