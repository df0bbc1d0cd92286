"""Commands on a sweep's run directory: report, resume, replay, and the offline proxy datasets.
`python -m hfsweep.report` (and `.resume`, `.replay`, `.datasets_offline`) run them."""

import gc


def leave_heap_to_exit() -> None:
    """Freeze the heap a finished sweep leaves (torch, transformers, Ray, Arrow: about 700,000
    objects) so that the interpreter's exit skips collecting it: after `python -m hfsweep
    debug=tiny`'s exit hooks, the interpreter took 19-106 s to end on 2 cores, and 2.5-4.7 s with
    the heap frozen. Exit hooks (Ray's shutdown among them) still run; only garbage cycles are
    left to the ending process."""
    gc.freeze()
