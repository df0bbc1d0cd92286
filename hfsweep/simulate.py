"""`python -m hfsweep.simulate`: Play back a finished sweep's curves through other schedulers
(see `hfsweep.cli.simulate`)."""

import sys

from hfsweep.cli.simulate import main

if __name__ == "__main__":
    sys.exit(main())
