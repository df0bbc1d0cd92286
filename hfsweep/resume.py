"""`python -m hfsweep.resume`: Resume an interrupted sweep (see `hfsweep.cli.resume`)."""

import sys

from hfsweep.cli.resume import main

if __name__ == "__main__":
    sys.exit(main())
