"""``python -m pausemesh``: the same as the ``pausemesh`` command."""

import sys

from pausemesh.cli import main

sys.exit(main())
