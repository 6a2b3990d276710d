"""``python -m kcoord.coordinator``: the same as the ``kcoord`` command."""

import sys

from .cli import main

sys.exit(main())
