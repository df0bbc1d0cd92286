"""Resume an interrupted sweep: `python -m hfsweep.resume RUN_DIR [KEY=VALUE ...] [--force]`.

Finished trials are not run again; unfinished and errored ones continue from their latest
checkpoint. The config is the one saved in RUN_DIR; overrides that change it are refused unless
--force is given.
"""

from __future__ import annotations

import argparse
import sys

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import saved_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hfsweep.resume", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="the interrupted sweep's run directory (holds resolved_config.yaml)")
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE changes to the saved config (need --force)")
    parser.add_argument("--force", action="store_true", help="resume even though the overrides change the config")
    args = parser.parse_args(argv)
    try:
        saved_config(args.run_dir, args.overrides, args.force)  # refuse in a second, before the sweep's imports
        from hfsweep.driver import sweep

        sweep.resume(args.run_dir, args.overrides, force=args.force)
    except ConfigError as err:
        print(f"hfsweep: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
