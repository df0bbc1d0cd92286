"""The checkpoint budget: keep each trial's best K checkpoints, free what no trial can still need.

Workers write Hugging Face checkpoints once, in place, and every report carries its path
(`checkpoint_path`) next to the sweep metric. `CheckpointBudget` is a Tune callback on the driver
that follows those reports and deletes checkpoint directories; Tune keeps its pointer checkpoints
(a few bytes each), since pruning them makes it snapshot its state at every checkpoint.
What it freed is written to the run directory's `checkpoints.json` for the summary and results.md.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable, Iterable
from typing import Optional

from ray import tune

from hfsweep.config.objectives import first_objective, is_multi_objective
from hfsweep.config.schema import SweepConfig
from hfsweep.contract.pointers import checkpoint_step
from hfsweep.driver.search.search_rules import is_population_training
from hfsweep.run_dir import CHECKPOINTS_FILE

# What only resuming a checkpoint reads (the Trainer's and Accelerate's names; FSDP's sharded optimizer
# state is a folder optimizer_0/, or a file optimizer_0_rankN.bin per worker): an ended trial's kept
# checkpoints drop them, and keep weights, config, tokenizer and trainer_state.json.
TRAINING_STATE_PREFIXES = (
    "optimizer.",
    "optimizer_",
    "scheduler.",
    "scaler.",
    "rng_state",
    "random_states_",
    "global_step",
)


class CheckpointBudget(tune.Callback):
    """Delete checkpoints nothing needs, by these rules:

    - a trial keeps its `keep_per_trial` best checkpoints by the sweep metric (of equal scores the
      later, as Tune's own `num_to_keep` ranks them);
    - a trial that has not ended (running, paused, errored) also keeps its latest, to resume from;
    - a trial stopped by the scheduler or a stopper keeps nothing;
    - the sweep's best checkpoint is never deleted (`best/` is exported from it at the end): of every
      trial whose best score is the sweep's, its best checkpoint (the later of equal ones);
    - with several objectives (`keep_latest`), every trial also keeps its latest: its last report
      is its point on the Pareto front, and `best/` may be exported from any of them;
    - an ended trial's kept checkpoints keep their weights only: nothing resumes it, so its
      optimizer, scheduler and RNG state (two thirds of a full AdamW checkpoint) are freed.

    Under PBT and PB2 any trial's checkpoint may be copied into another trial until the end, so
    with `defer` nothing is deleted before the experiment ends. `tally_path`: where what was freed
    is written (a JSON file), None for nowhere.

    What the rules free is deleted at Tune's next experiment snapshot (`get_state`, which Tune
    calls after writing every trial's latest checkpoint), not at the report that freed it: until
    then the saved state may still name it as a trial's latest, and a driver killed in between
    would resume that trial from a folder that is gone.
    """

    def __init__(
        self,
        metric: str,
        mode: str,
        keep_per_trial: int,
        defer: bool,
        keep_latest: bool = False,
        tally_path: Optional[str] = None,
    ):
        self.metric, self.sign, self.keep, self.defer = metric, 1.0 if mode == "max" else -1.0, keep_per_trial, defer
        self.keep_latest, self.tally_path = keep_latest, tally_path
        self.checkpoints: dict[str, dict[str, float]] = {}  # trial id -> {path: score}, in report order
        self.folders: dict[str, set[str]] = {}  # trial id -> folders its checkpoints were written in
        self.ended: dict[str, str] = {}  # trial id -> "completed" or "stopped"
        self.freed = {"checkpoints": 0, "bytes": 0}  # whole checkpoints deleted, and all bytes freed
        self.queued: dict[tuple[Callable[[str], None], str], None] = {}  # freed, deleted at the next snapshot

    def on_trial_result(self, iteration, trials, trial, result, **info):
        path = result.get("checkpoint_path")
        if path and self.metric in result:
            self.checkpoints.setdefault(trial.trial_id, {})[path] = self._score(result[self.metric])
            self.folders.setdefault(trial.trial_id, set()).add(os.path.dirname(path))
            self._prune()

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.ended[trial.trial_id] = "completed" if trial.last_result.get("trainer_finished") else "stopped"
        self._prune()

    def on_experiment_end(self, trials, **info):
        """Nothing can be exploited any more; also remove checkpoints an ended trial wrote but
        never reported (the save that was under way when the scheduler stopped it)."""
        self.defer = False
        self._prune()
        self._delete_queued()
        for trial_id in self.ended:
            kept = set(self.checkpoints.get(trial_id, ()))
            for folder in self.folders.get(trial_id, ()):
                for name in os.listdir(folder) if os.path.isdir(folder) else ():
                    path = os.path.join(folder, name)
                    if checkpoint_step(name) is not None and path not in kept:
                        self._delete(path)
        self._write_tally()

    def get_state(self) -> dict:
        self._delete_queued()  # the snapshot Tune is saving names every trial's newer checkpoints
        return {"checkpoints": self.checkpoints, "folders": self.folders, "ended": self.ended, "freed": self.freed}

    def set_state(self, state: dict) -> None:
        self.checkpoints, self.folders, self.ended = state["checkpoints"], state["folders"], state["ended"]
        self.freed = state.get("freed", self.freed)  # a budget saved before the tally had none

    def _score(self, value: float) -> float:
        return self.sign * value if math.isfinite(value) else -math.inf

    def _needed(self, trial_id: str, checkpoints: dict[str, float]) -> set[str]:
        ended = self.ended.get(trial_id)
        latest = {next(reversed(checkpoints))} if ended is None or self.keep_latest else set()
        if ended == "stopped":
            return latest
        order = {path: i for i, path in enumerate(checkpoints)}  # report order
        return (
            set(sorted(checkpoints, key=lambda path: (checkpoints[path], order[path]), reverse=True)[: self.keep])
            | latest
        )

    def _prune(self) -> None:
        if self.defer:
            return
        scores = [score for checkpoints in self.checkpoints.values() for score in checkpoints.values()]
        best = max(scores, default=None)
        for trial_id, checkpoints in self.checkpoints.items():
            tied = [path for path, score in checkpoints.items() if score == best]
            needed = self._needed(trial_id, checkpoints) | set(tied[-1:])
            for path in [p for p in checkpoints if p not in needed]:
                self.queued[self._delete, path] = None
                del checkpoints[path]
            if trial_id in self.ended:
                self.queued.update(dict.fromkeys((self._free_training_state, path) for path in checkpoints))

    def _delete_queued(self) -> None:
        for free, path in self.queued:
            free(path)
        self.queued = {}
        self._write_tally()

    def _delete(self, path: str) -> None:
        self.freed["bytes"] += folder_bytes(path)
        self.freed["checkpoints"] += os.path.isdir(path)
        shutil.rmtree(path, ignore_errors=True)

    def _free_training_state(self, path: str) -> None:
        for name in os.listdir(path) if os.path.isdir(path) else ():
            if name.startswith(TRAINING_STATE_PREFIXES):
                state = os.path.join(path, name)
                self.freed["bytes"] += folder_bytes(state)
                shutil.rmtree(state) if os.path.isdir(state) else os.remove(state)

    def _write_tally(self) -> None:
        if self.tally_path:
            with open(self.tally_path, "w") as f:
                json.dump({"keep_per_trial": self.keep, "freed": self.freed}, f)


def folder_bytes(path: str) -> int:
    """The bytes of the files under `path` (a file's own size for a file)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def build_checkpoint_budget(sweep: SweepConfig) -> Optional[CheckpointBudget]:
    """The budget callback for `checkpoints.keep_per_trial` (ranked by the first objective); None
    keeps every checkpoint. A re-run (the selection over seeds, replay) scores its runs' final
    models, so each keeps its last checkpoint too (`checkpoints.keep_final`)."""
    keep = sweep.checkpoints.keep_per_trial
    if keep is None:
        return None
    metric, mode = first_objective(sweep)
    # a test split scores the winner's and the defaults' final models after a search that does not select
    final_scored = sweep.checkpoints.keep_final or (bool(sweep.data.test_split) and not sweep.select.top_k)
    return CheckpointBudget(
        metric,
        mode,
        keep,
        defer=is_population_training(sweep),
        keep_latest=is_multi_objective(sweep) or final_scored,
        tally_path=os.path.join(sweep.cluster.storage_path, CHECKPOINTS_FILE),
    )


def checkpoint_disk_use(histories: Iterable) -> tuple[int, int]:
    """(checkpoints, bytes) on disk in the folders the sweep's trials (their `histories`, Tune's
    metrics data frames) wrote checkpoints in."""
    folders = set()
    for history in histories:
        if history is not None and "checkpoint_path" in history:
            folders |= {os.path.dirname(p) for p in history["checkpoint_path"].dropna()}
    count = size = 0
    for folder in folders:
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            if checkpoint_step(name) is not None:
                count += 1
                size += folder_bytes(os.path.join(folder, name))
    return count, size


def checkpoints_line(run_dir: str, on_disk: tuple[int, int]) -> str:
    """What the sweep keeps on disk and what its budget freed (`checkpoints.json`), in one line."""
    count, size = on_disk
    path = os.path.join(run_dir, CHECKPOINTS_FILE)
    if not os.path.isfile(path):
        return f"{count} on disk, {size / 2**20:.1f} MiB (all kept; set checkpoints.keep_per_trial=K to keep fewer)"
    with open(path) as f:
        tally = json.load(f)
    freed = tally["freed"]
    return (
        f"{count} on disk, {size / 2**20:.1f} MiB (the best {tally['keep_per_trial']} per trial, ended trials' "
        f"weights only); freed {freed['checkpoints']} checkpoints and {freed['bytes'] / 2**20:.1f} MiB"
    )
