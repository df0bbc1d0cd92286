"""`python -m hfsweep.resume`: Resume an interrupted sweep (see `hfsweep.cli.resume`)."""

import sys

from hfsweep.cli import leave_heap_to_exit
from hfsweep.cli.resume import main

if __name__ == "__main__":
    code = main()
    leave_heap_to_exit()
    sys.exit(code)
