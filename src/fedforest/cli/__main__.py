"""``python -m fedforest.cli``: the ``fedforest`` command."""

import sys

from . import main

sys.exit(main())
