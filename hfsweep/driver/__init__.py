"""The driver room, in the sweep's process: the preflight (every check, by owner, once), Ray, the
Tuner, search spaces and the search rules, schedulers, searchers, loggers, the checkpoint budget,
the best trial, its export and the report, and provenance. Kept light at import: Hydra loads
`driver.multirun` before any job."""
