"""Resume an interrupted sweep: `python -m hfsweep.resume RUN_DIR [KEY=VALUE ...] [--force]`.

Finished trials are not run again; unfinished and errored ones continue from their latest
checkpoint. The config is the one saved in RUN_DIR; overrides that change it are refused unless
--force is given. `--extend num_samples=N` (or wider `search_space.*` values) adds trials to a
finished sweep instead; an extension that changes anything else is refused.
"""

from __future__ import annotations

import argparse
import sys

from hfsweep.config.errors import ConfigError
from hfsweep.config.saved import extended_config, saved_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hfsweep.resume", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?", help="the interrupted sweep's run directory (holds resolved_config.yaml)")
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE changes to the saved config (need --force)")
    parser.add_argument("--force", action="store_true", help="resume even though the overrides change the config")
    parser.add_argument(
        "--extend",
        nargs="+",
        metavar="KEY=VALUE",
        default=[],
        help="add trials to a finished sweep: num_samples=N, or search_space.* values",
    )
    args = parser.parse_args(argv)
    if args.run_dir is None:  # `--extend KEY=VALUE ... RUN_DIR`: --extend took the directory too
        folders = [value for value in args.extend if "=" not in value]
        if len(folders) != 1:
            parser.error("the following arguments are required: run_dir")
        args.run_dir = folders[0]
        args.extend.remove(args.run_dir)
    if args.extend and (args.overrides or args.force):
        parser.error("--extend takes its KEY=VALUE changes itself; give no other overrides or --force with it")
    try:
        if args.extend:
            extended_config(args.run_dir, args.extend)  # refuse in a second, before the sweep's imports
        else:
            saved_config(args.run_dir, args.overrides, args.force)
        from hfsweep.driver import resume

        if args.extend:
            resume.extend(args.run_dir, args.extend)
        else:
            resume.resume(args.run_dir, args.overrides, force=args.force)
    except ConfigError as err:
        print(f"hfsweep: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
