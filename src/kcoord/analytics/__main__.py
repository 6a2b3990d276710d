"""``python -m kcoord.analytics ...``: the same as ``kcoord analytics ...``."""

import sys

from kcoord.analytics.run import main

sys.exit(main())
