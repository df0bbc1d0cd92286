"""`python -m hfsweep.report`: Regenerate a sweep's table and plots (see `hfsweep.cli.report`)."""

import sys

from hfsweep.cli.report import main

if __name__ == "__main__":
    sys.exit(main())
