"""The contract between the trial and the training loops, below both (no loop imports the trial),
by concern: `recipe` (what a trial hands the loop on every worker), `protocols` (what the layers
below the driver use of a Task, and hand its metrics), `metrics` (what a worker reports besides
the Task's metrics, and how a worker group's reports combine), `pointers` (the tiny checkpoints
Tune gets, and checkpoint names)."""
