"""The loops room, on a Ray Train worker (or in a single-worker trial's process): `base` holds the
`Loop` of each `loop.name` and what it refuses (kept light, the preflight imports it); `common`
what both loops share (reporting, resume, hyperparameters on resume, divergence); `hf_trainer`
(a prepared `transformers.Trainer`) and `accelerate` (a plain Accelerate loop) each expose
`train_loop_per_worker(job)`, and take everything from its `TrainJob` (hfsweep.contract.recipe),
the sweep's Task included."""
