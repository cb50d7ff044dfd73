"""`python -m workers.lab up|down|status`: see workers.lab.cli."""

import sys

from workers.lab.cli import main

sys.exit(main())
