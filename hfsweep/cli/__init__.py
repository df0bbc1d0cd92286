"""Commands on a sweep's run directory: report, resume, replay, and the offline proxy datasets.
`python -m hfsweep.report` (and `.resume`, `.replay`, `.datasets_offline`) run them."""

import gc


def leave_heap_to_exit() -> None:
    """Freeze the heap a finished sweep leaves (torch, transformers, Ray, Arrow: about 700,000
    objects) so that the interpreter's exit skips collecting it: unfrozen, `python -m hfsweep
    debug=tiny` took 7.5-106 s after its summary to exit on 2 cores, frozen 2.5-4.7 s. Exit hooks
    (Ray's shutdown among them) still run; only garbage cycles are left to the ending process."""
    gc.freeze()
