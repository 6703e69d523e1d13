"""``python -m sgmfast.cli``."""

import sys

from . import main

sys.exit(main())
