"""The driver room, in the sweep's process: Ray, the Tuner, search spaces, schedulers, searchers,
loggers, the checkpoint budget, results and provenance. Kept light at import: Hydra loads
`driver.multirun` before any job."""
