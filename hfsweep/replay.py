"""`python -m hfsweep.replay`: Re-train a finished sweep's best configuration over seeds (see `hfsweep.cli.replay`)."""

import sys

from hfsweep.cli import leave_heap_to_exit
from hfsweep.cli.replay import main

if __name__ == "__main__":
    code = main()
    leave_heap_to_exit()
    sys.exit(code)
