"""What re-training a finished sweep's configurations changes in its config (replay, and selection
over seeds), kept light: replay's command line refuses bad input before Ray's import."""

# Replaces these top-level keys of a re-training (replay's and selection's): every run trains to its
# last step (no scheduler, stopper or budget ends it early), and the variant generator runs the grid
# over seeds.
RUN_TO_THE_END = {
    "scheduler": {"_target_": "ray.tune.schedulers.FIFOScheduler"},
    "search_alg": {"_target_": "ray.tune.search.BasicVariantGenerator"},
    "stopper": {},
    "callbacks": {},
    "num_samples": 1,
    "budget": {"wall_clock_s": None, "trial_hours": None, "usd": None, "train_samples": None},
}
