"""``python -m research.main_job``: see :mod:`research.main_job.cli`."""

import sys

from research.main_job.cli import main

sys.exit(main())
