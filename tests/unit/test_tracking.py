"""Loggers, the checkpoint budget and replay, without Ray: what each builds and what it deletes."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pyarrow.fs
import pytest
import yaml
from ray.air.integrations.mlflow import MLflowLoggerCallback

from hfsweep.cli import replay
from hfsweep.config.errors import ConfigError
from hfsweep.driver.loggers import (
    FlushingWandbLoggerCallback,
    HistoryCSVLoggerCallback,
    HistoryJsonLoggerCallback,
    HParamsTBXLoggerCallback,
    build_loggers,
)
from hfsweep.driver.preflight import preflight
from hfsweep.driver.search.checkpoint_budget import (
    CheckpointBudget,
    build_checkpoint_budget,
    checkpoint_disk_use,
    checkpoints_line,
)
from tests.conftest import CONF_DIR, resolved_config, sweep_config

LOGGERS = {
    "tensorboard": HParamsTBXLoggerCallback,
    "wandb": FlushingWandbLoggerCallback,
    "mlflow": MLflowLoggerCallback,
}


def test_every_logger_option_is_tested():
    assert {p.stem for p in (Path(CONF_DIR) / "logger").glob("*.yaml")} == {"none", *LOGGERS}


def test_csv_and_json_always_and_loggers_combine(tmp_path):
    assert [type(c) for c in build_loggers(sweep_config([], tmp_path, tmp_path))] == [
        HistoryCSVLoggerCallback,
        HistoryJsonLoggerCallback,
    ]
    loggers = build_loggers(sweep_config(["logger=[tensorboard,wandb,mlflow]"], tmp_path, tmp_path))
    assert [type(c) for c in loggers] == [HistoryCSVLoggerCallback, HistoryJsonLoggerCallback, *LOGGERS.values()]
    tensorboard, wandb, mlflow = loggers[2:]
    assert tensorboard.objectives == ["eval_loss"]  # the sweep's metric, first in each trial's HParams session
    assert wandb.group == str(tmp_path) and wandb.kwargs["dir"] == str(tmp_path)
    assert mlflow.tracking_uri == f"sqlite:///{tmp_path}/mlflow.db" and mlflow.experiment_name == str(tmp_path)


def restarted_trial(tmp_path, local_rows: int, storage_rows: int):
    """A trial restarting from a checkpoint, whose driver-side result file holds `local_rows`
    results and whose storage copy (last synced earlier) holds `storage_rows`."""
    local_dir, storage_dir = tmp_path / "local", tmp_path / "storage"
    for folder, rows in ((local_dir, local_rows), (storage_dir, storage_rows)):
        folder.mkdir()
        if rows:
            (folder / "result.json").write_text("".join(json.dumps({"step": 10 * (i + 1)}) + "\n" for i in range(rows)))

    class Trial:  # the parts of a Tune Trial the loggers read; hashable, as they key files by trial
        checkpoint, config, local_path, trial_id = object(), {}, str(local_dir), "t"
        storage = SimpleNamespace(trial_fs_path=str(storage_dir), storage_filesystem=pyarrow.fs.LocalFileSystem())

        def init_local_path(self):
            pass

    return Trial()


def steps_after_one_more_result(trial) -> list:
    logger = HistoryJsonLoggerCallback()
    logger.log_trial_start(trial)  # what Tune calls when the trial restarts
    logger.log_trial_result(0, trial, {"step": 99})
    logger.log_trial_end(trial)
    return [json.loads(line)["step"] for line in Path(trial.local_path, "result.json").read_text().splitlines()]


def test_a_restarted_trial_keeps_the_results_reported_since_the_last_sync(tmp_path):
    assert steps_after_one_more_result(restarted_trial(tmp_path, local_rows=2, storage_rows=1)) == [10, 20, 99]


def test_a_resumed_driver_restores_the_history_from_storage(tmp_path):
    assert steps_after_one_more_result(restarted_trial(tmp_path, local_rows=0, storage_rows=1)) == [10, 99]


def test_a_restarted_trial_appends_its_rows_under_the_files_own_header(tmp_path):
    """A restarted trial's first result holds keys its first run never reported, in another order."""
    trial = restarted_trial(tmp_path, local_rows=0, storage_rows=0)
    logger = HistoryCSVLoggerCallback()
    logger.log_trial_start(trial)
    logger.log_trial_result(0, trial, {"step": 10, "eval_loss": 0.7, "eval_accuracy": 0.5})
    logger.log_trial_end(trial)
    logger.log_trial_start(trial)  # the restart
    logger.log_trial_result(1, trial, {"resumed_from": "ckpt", "eval_accuracy": 0.6, "step": 20, "eval_loss": 0.6})
    logger.log_trial_end(trial)
    history = pd.read_csv(Path(trial.local_path, "progress.csv"))
    assert history.to_dict("list") == {"step": [10, 20], "eval_loss": [0.7, 0.6], "eval_accuracy": [0.5, 0.6]}


# Ray's WandbLoggerCallback.__del__ reads attributes its failed __init__ never set.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_logger_without_its_package_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setattr("ray.air.integrations.wandb.wandb", None)
    with pytest.raises(
        ConfigError, match=r"^logger\.wandb: .*WandbLoggerCallback cannot start .*pip install 'hfsweep\[loggers\]'\.$"
    ):
        build_loggers(sweep_config(["logger=wandb"], tmp_path, tmp_path))


def test_keep_per_trial_must_keep_the_best(tmp_path):
    with pytest.raises(ConfigError, match=r"^checkpoints\.keep_per_trial: must be at least 1 .*, not 0; or null"):
        preflight(resolved_config(["checkpoints.keep_per_trial=0"], tmp_path, tmp_path))
    assert build_checkpoint_budget(sweep_config(["checkpoints.keep_per_trial=null"], tmp_path, tmp_path)) is None
    assert build_checkpoint_budget(sweep_config([], tmp_path, tmp_path)).keep == 1  # bounded by default
    assert build_checkpoint_budget(
        sweep_config(["checkpoints.keep_per_trial=2", "scheduler=pbt"], tmp_path, tmp_path)
    ).defer
    # a re-run scores its runs' final models: each keeps its latest beside its best
    assert not build_checkpoint_budget(sweep_config([], tmp_path, tmp_path)).keep_latest
    assert build_checkpoint_budget(sweep_config(["checkpoints.keep_final=true"], tmp_path, tmp_path)).keep_latest


def test_replay_and_the_selection_keep_each_runs_final_model_which_they_score(tmp_path):
    """Replay scores each seed's final model on every extra_validation set, and the selection ranks
    final models: their checkpoint budgets keep each run's last checkpoint beside its best."""
    from hfsweep.config.schema import SweepConfig, typed
    from hfsweep.driver.results.select import selection_config

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "resolved_config.yaml").write_text(yaml.safe_dump(resolved_config([], tmp_path, tmp_path)))
    (run_dir / "best.json").write_text(json.dumps({"hyperparameters": {"training.learning_rate": 1e-3}}))
    replayed = typed(SweepConfig, replay.replay_config(str(run_dir), [1, 2]))
    assert build_checkpoint_budget(replayed).keep_latest
    sweep = sweep_config(["select.top_k=1"], tmp_path, tmp_path)
    selection = selection_config(sweep, [{"training.learning_rate": 1e-3}], str(tmp_path / "select"))
    assert build_checkpoint_budget(selection).keep_latest


# A Trainer checkpoint's files, with sizes: the weights, and what only resuming reads.
CHECKPOINT_FILES = {"model.safetensors": 100, "config.json": 1, "trainer_state.json": 1, "optimizer.pt": 200}
CHECKPOINT_FILES.update({"scheduler.pt": 1, "rng_state_0.pth": 1, "rng_state_1.pth": 1})


class Sweep:
    """Drives a CheckpointBudget as Tune would, with real checkpoint folders under tmp_path."""

    def __init__(self, tmp_path: Path, keep: int = 1, defer: bool = False):
        self.root, self.budget = tmp_path, CheckpointBudget("eval_loss", "min", keep, defer)

    def report(self, trial_id: str, step: int, loss: float) -> str:
        path = self.root / trial_id / f"checkpoint-{step}"
        path.mkdir(parents=True)
        for name, size in CHECKPOINT_FILES.items():
            (path / name).write_bytes(b"x" * size)
        result = {"checkpoint_path": str(path), "eval_loss": loss, "step": step}
        self.budget.on_trial_result(0, [], SimpleNamespace(trial_id=trial_id), result)
        return str(path)

    def end(self, trial_id: str, finished: bool) -> None:
        self.budget.on_trial_complete(
            0, [], SimpleNamespace(trial_id=trial_id, last_result={"trainer_finished": finished})
        )

    def snapshot(self) -> None:
        """Tune saving the experiment's state: the budget deletes what it freed since the last one."""
        self.budget.get_state()

    def on_disk(self) -> set[str]:
        """The checkpoint folders after Tune's next snapshot."""
        self.snapshot()
        return {str(p) for p in self.root.glob("*/checkpoint-*")}


def test_a_freed_checkpoint_stays_until_tunes_snapshot_names_the_newer_one(tmp_path):
    """Tune's saved state names a trial's latest checkpoint until its next snapshot: deleting the
    one a report superseded before that would leave a killed driver's resume a folder that is gone."""
    sweep = Sweep(tmp_path, keep=1)
    best = sweep.report("a", 5, 3.0)
    superseded = sweep.report("a", 10, 4.0)
    latest = sweep.report("a", 15, 3.5)
    assert Path(superseded).exists()  # freed, but the saved state may still name it
    sweep.snapshot()
    assert {str(p) for p in tmp_path.glob("*/checkpoint-*")} == {best, latest}


def test_a_running_trial_keeps_its_best_and_its_latest(tmp_path):
    sweep = Sweep(tmp_path, keep=1)
    best = sweep.report("a", 5, 3.0)
    sweep.report("a", 10, 4.0)
    latest = sweep.report("a", 15, 3.5)
    assert sweep.on_disk() == {best, latest}
    sweep.end("a", finished=True)
    assert sweep.on_disk() == {best}


def test_an_ended_fsdp_trial_drops_its_sharded_optimizer_state_and_keeps_its_sharded_weights(tmp_path):
    """Accelerate saves FSDP's sharded state as folders: the model's pytorch_model_fsdp_0/ (weights,
    kept) and the optimizer's optimizer_0/ (two thirds of a checkpoint, which nothing reads once
    the trial has ended)."""
    sweep = Sweep(tmp_path, keep=1)
    best = Path(sweep.report("a", 5, 3.0))
    for folder in ("pytorch_model_fsdp_0", "optimizer_0"):
        (best / folder).mkdir()
        (best / folder / "__0_0.distcp").write_bytes(b"x" * 100)
    sweep.end("a", finished=True)
    sweep.snapshot()
    kept = {p.name for p in best.iterdir()}
    assert "pytorch_model_fsdp_0" in kept and "optimizer_0" not in kept


def test_an_ended_trial_keeps_weights_only_and_the_tally_counts_what_was_freed(tmp_path):
    """While a trial runs its checkpoints are whole (it may resume); once it ends nothing resumes
    it, and its kept best drops the optimizer, scheduler and RNG state. What was freed is written
    for the summary."""
    tally = tmp_path / "checkpoints.json"
    sweep = Sweep(tmp_path / "trials", keep=1)
    sweep.budget.tally_path = str(tally)
    best = sweep.report("a", 5, 3.0)
    latest = sweep.report("a", 10, 4.0)
    assert {p.name for p in Path(best).iterdir()} == set(CHECKPOINT_FILES)  # running: whole
    sweep.end("a", finished=True)
    assert sweep.on_disk() == {best} and not Path(latest).exists()
    assert {p.name for p in Path(best).iterdir()} == {"model.safetensors", "config.json", "trainer_state.json"}
    whole, state = sum(CHECKPOINT_FILES.values()), 200 + 1 + 1 + 1
    assert json.loads(tally.read_text()) == {"keep_per_trial": 1, "freed": {"checkpoints": 1, "bytes": whole + state}}
    assert checkpoints_line(str(tmp_path), checkpoint_disk_use([pd.DataFrame({"checkpoint_path": [best]})])) == (
        "1 on disk, 0.0 MiB (the best 1 per trial, ended trials' weights only); freed 1 checkpoints and 0.0 MiB"
    )


def test_a_stopped_trial_is_freed_unless_it_holds_the_sweeps_best(tmp_path):
    sweep = Sweep(tmp_path, keep=2)
    sweep_best = sweep.report("a", 5, 2.0)
    sweep.end("a", finished=False)  # stopped, but the best of the sweep so far
    assert sweep.on_disk() == {sweep_best}
    loser = sweep.report("b", 5, 3.0)
    sweep.end("b", finished=False)
    assert loser not in sweep.on_disk()
    better = sweep.report("c", 5, 1.0)
    assert sweep.on_disk() == {better}  # a's checkpoint was only kept as the best


def test_under_pbt_nothing_is_deleted_before_the_end(tmp_path):
    sweep = Sweep(tmp_path, keep=1, defer=True)
    paths = [sweep.report("a", step, loss) for step, loss in ((5, 3.0), (10, 2.0), (15, 2.5))]
    sweep.end("a", finished=True)
    assert sweep.on_disk() == set(paths)
    straggler = tmp_path / "a" / "checkpoint-20"  # written after the last report, never reported
    straggler.mkdir()
    sweep.budget.on_experiment_end([])
    assert sweep.on_disk() == {paths[1]}


def test_the_budget_survives_a_resume(tmp_path):
    """A resumed budget still knows the checkpoints reported before the interruption: it keeps
    the best of them and frees the others (a budget that forgot them would leave step 12), and
    its tally of what it freed goes on."""
    sweep = Sweep(tmp_path, keep=1)
    best = sweep.report("a", 5, 2.0)
    sweep.report("a", 10, 3.0)
    sweep.report("a", 12, 3.0)  # frees step 10
    restored = Sweep(tmp_path, keep=1)
    restored.budget.set_state(sweep.budget.get_state())
    latest = restored.report("a", 15, 2.5)
    assert restored.on_disk() == {best, latest}
    assert restored.budget.freed["checkpoints"] == 2  # step 10 before the interruption, step 12 after


def finished_sweep_dir(tmp_path: Path) -> Path:
    overrides = ["stopper=plateau", "callbacks=early_stopping", "search_alg=random", "select.top_k=1"]
    cfg = resolved_config(overrides, tmp_path, tmp_path)
    (tmp_path / "resolved_config.yaml").write_text(yaml.safe_dump(cfg))
    hyperparameters = {"training.learning_rate": 0.001}
    (tmp_path / "best.json").write_text(json.dumps({"hyperparameters": hyperparameters}))
    return tmp_path


def test_replay_config_runs_the_best_hyperparameters_over_seeds_to_the_end(tmp_path):
    run_dir = finished_sweep_dir(tmp_path)
    cfg = replay.replay_config(str(run_dir), [1, 2, 3])
    preflight(cfg)
    assert cfg["training"]["learning_rate"] == 0.001 and cfg["training"]["max_steps"] == 60
    assert cfg["search_space"] == {"seed": {"sampler": "grid", "values": [1, 2, 3]}}
    assert cfg["scheduler"]["_target_"].endswith("FIFOScheduler")
    assert (cfg["stopper"], cfg["callbacks"], cfg["num_samples"]) == ({}, {}, 1)
    assert cfg["select"]["top_k"] == 0  # the sweep selected (top_k 1); its replay would select over seeds again
    assert cfg["cluster"]["storage_path"] == str(run_dir / "replay")


@pytest.mark.parametrize(
    "setup, message",
    [
        (
            lambda d: d / "missing",
            "replay: '{d}/missing' holds no resolved_config.yaml; pass the run directory of a finished sweep.",
        ),
        (
            lambda d: (finished_sweep_dir(d) / "best.json").unlink() or d,
            "replay: '{d}' holds no best.json; pass the run directory of a finished sweep.",
        ),
        (
            lambda d: (finished_sweep_dir(d) / "replay").mkdir() or d,
            "replay: '{d}/replay' already exists; move or delete it to replay again.",
        ),
    ],
)
def test_replay_refuses_in_one_line_with_exit_2(setup, message, tmp_path, capsys):
    run_dir = setup(tmp_path)
    assert replay.main([str(run_dir), "--seeds", "1", "2"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"hfsweep: error: {message.format(d=tmp_path)}"]
