"""``python -m research.eval``: see :mod:`research.eval.cli`."""

import sys

from research.eval.cli import main

sys.exit(main())
