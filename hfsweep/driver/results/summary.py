"""The one screen a finished sweep ends with, on the console (the best trial, the search against
the defaults, cost, budget, checkpoints): apart from the files `report` writes, whose table it reads."""

from __future__ import annotations

import math
import os
from typing import Optional

import pandas as pd

from hfsweep import run_dir as run_files
from hfsweep.config.objectives import first_objective, is_multi_objective
from hfsweep.config.schema import SweepConfig
from hfsweep.driver.results.best import BestTrial
from hfsweep.driver.results.report import defaults_score, samples_line
from hfsweep.driver.search import defaults_trial
from hfsweep.driver.search.checkpoint_budget import checkpoints_line
from hfsweep.driver.search.schedulers import warm_started_tpe


def sweep_summary(
    best: BestTrial,
    table: pd.DataFrame,
    sweep: SweepConfig,
    *,
    untrained_loss: Optional[float],
    perplexity: bool,
    startup: Optional[int],
    drawn_at_random: Optional[int],
    budget,
    checkpoints: tuple[int, int],
    exported: bool = True,
) -> str:
    """The one screen a finished search ends with: the best trial, its objectives and the Pareto
    front, the search against the defaults trial, cost, budget (and whether the sweep ended on it)
    and the checkpoints on disk (`checkpoints`: their count and bytes). `exported`: best/ is this
    best trial's model (not a finished selection's winner)."""
    lines = [summary(best, sweep.cluster.storage_path, untrained_loss, perplexity, exported)]
    if is_multi_objective(sweep):
        values = ", ".join(f"{name} = {value:.4g}" for name, value in best.objectives.items())
        lines.append(f"  objectives:      {values} (its last report)")
        lines.append(
            f"  Pareto front:    {table['pareto'].sum()} of {len(table)} trials, marked in results.md and drawn in "
            f"{run_files.PARETO_PLOT}; best/ is the one with the best {best.metric}"
        )
    lines += search_lines(table, sweep, best, startup, drawn_at_random)
    if "cost_usd" in table:
        lines.append(
            f"  cost:            ${table['cost_usd'].sum():.4g} for {len(table)} trials (cost_usd in results.csv)"
        )
    if samples_line(table):
        lines.append(f"  samples:         {samples_line(table)}")
    if budget is not None:
        lines.append(f"  budget:          {budget.summary()}")
    if budget is not None and budget.reason:
        ended = ", ".join(f"{n} {why}" for why, n in table["ended"].value_counts().items())
        lines.append(
            f"  budget:          the sweep ended on {budget.reason}; no trial started after, running ones were stopped "
            f"({ended})"
        )
    lines.append(f"  checkpoints:     {checkpoints_line(sweep.cluster.storage_path, checkpoints)}")
    return "\n".join(lines)


def selection_spend_lines(rerun_table: pd.DataFrame, search_cost: Optional[pd.Series], budget) -> list[str]:
    """What the selection's re-training added to the search's cost and budget."""
    lines = []
    if "cost_usd" in rerun_table and search_cost is not None:
        searched, selected = search_cost.sum(), rerun_table["cost_usd"].sum()
        lines.append(
            f"  cost:            ${searched:.4g} for the search + ${selected:.4g} for the selection's "
            f"{len(rerun_table)} runs = ${searched + selected:.4g}"
        )
    if budget is not None:
        lines.append(f"  budget:          {budget.summary()}, the selection included")
    return lines


MODEL_WORDS = {"best": "its best checkpoint by validation", "final": "its final model"}  # BestTrial.model's


def summary(
    best: BestTrial,
    run_dir: str,
    untrained_loss: Optional[float] = None,
    perplexity: bool = False,
    exported: bool = True,
) -> str:
    """The console's account of the best trial (`perplexity`: the task's loss is a token loss;
    `exported`: best/ holds its model, not a finished selection's winner)."""
    lines = [f"Best trial {best.trial_id} at step {best.step}:"]
    lines += [f"  {path} = {value}" for path, value in best.hyperparameters.items()]
    lines.append(f"  {best.metric} = {best.value:.4f} ({MODEL_WORDS[best.model]})")
    if best.metric == "eval_loss":
        if perplexity:
            lines.append(f"  perplexity = {math.exp(best.value):.2f}")
        if untrained_loss:
            drop = 1 - best.value / untrained_loss
            lines.append(f"  untrained eval_loss = {untrained_loss:.4f} ({drop:.0%} lower after training)")
    checkpoint = "best checkpoint:" if best.model == "best" else "final model:    "
    lines.append(f"  {checkpoint} {best.checkpoint_path} ({best.checkpoint_bytes / 2**20:.2f} MiB)")
    if exported:
        lines.append(f"  exported model:  {os.path.join(run_dir, 'best')}")
    else:
        lines.append(
            f"  exported model:  {os.path.join(run_dir, 'best')} is the selection's winner "
            f"({os.path.join(run_dir, run_files.SELECT_DIR, run_files.SELECTION_FILE)}), not this trial"
        )
    lines.append(
        f"  results:         {os.path.join(run_dir, 'results.md')} (and .csv, curves.png, hyperparameters.png)"
    )
    return "\n".join(lines)


def search_lines(
    table: pd.DataFrame, sweep: SweepConfig, best, startup: Optional[int], drawn_at_random: Optional[int]
) -> list[str]:
    """The summary's lines on the search itself: the winner against the defaults trial, and how
    many trials a model-based searcher chose by its model rather than its random start-up."""
    lines = []
    value = defaults_score(table, best.metric, best.model)
    if value is not None:
        gain = (best.value - value) * (1 if first_objective(sweep)[1] == "max" else -1)
        relative = f" ({gain / abs(value):+.1%})" if value else ""
        verdict = f"the best is {gain:+.4g} better{relative}" if gain > 0 else "no searched trial beat it"
        lines.append(
            f"  defaults trial:  {best.metric} = {value:.4f} ({MODEL_WORDS[best.model]}; the config's own values); "
            f"{verdict}"
        )
    elif defaults_trial.wanted(sweep):
        lines.append("  defaults trial:  did not report; no gain over the config's own values to state")
    if startup is not None and drawn_at_random is not None:
        lines.append(
            f"  searcher:        {drawn_at_random} trials drawn at random (start-up), "
            f"{max(0, len(table) - drawn_at_random)} chosen by its model "
            + (
                "(warm-started: the earlier trials were its start-up)"
                if warm_started_tpe(sweep)
                else f"(search_alg.startup_trials={startup})"
            )
        )
    return lines
