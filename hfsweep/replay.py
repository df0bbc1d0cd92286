"""`python -m hfsweep.replay`: Re-train a finished sweep's best configuration over seeds (see `hfsweep.cli.replay`)."""

import sys

from hfsweep.cli.replay import main

if __name__ == "__main__":
    sys.exit(main())
