"""``python -m sgmfast``: the command line, the same as the ``sgmfast`` command."""

import sys

from .cli import main

sys.exit(main())
