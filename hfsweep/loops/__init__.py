"""The loops room, on a Ray Train worker (or in a single-worker trial's process): `common` holds
what both loops share (reporting, resume, hyperparameters on resume, divergence); `loop.name`
picks `hf_trainer` (a prepared `transformers.Trainer`) or `accelerate` (a plain Accelerate loop),
each exposing `train_loop_per_worker(config)`."""
