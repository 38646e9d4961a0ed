"""``python -m research.default_pipeline``: see :mod:`research.default_pipeline.cli`."""

import sys

from research.default_pipeline.cli import main

sys.exit(main())
