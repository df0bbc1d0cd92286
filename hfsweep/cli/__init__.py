"""Commands on a sweep's run directory: report, resume, replay, and the offline proxy datasets.
`python -m hfsweep.report` (and `.resume`, `.replay`, `.datasets_offline`) run them."""
