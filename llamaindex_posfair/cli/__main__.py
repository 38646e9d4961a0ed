import sys

from llamaindex_posfair.cli import main

sys.exit(main())
