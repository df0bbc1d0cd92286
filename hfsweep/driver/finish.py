"""What a search hands back once its trials end: the best trial (over an extended sweep's earlier
experiments too), `best/`, the tables and plots, the one-screen summary, the test split's scores
when one is held out, and then, with `select.top_k`, the selection over seeds (`over_seeds`)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Optional

from ray import tune

from hfsweep.config.schema import SweepConfig
from hfsweep.data.prepared import PreparedData
from hfsweep.driver.over_seeds import UNFINISHED, select_over_seeds, selection_finished
from hfsweep.driver.results.best import BestTrial, best_trial, write_best
from hfsweep.driver.results.evaluation import evaluate_model
from hfsweep.driver.results.export import export_best
from hfsweep.driver.results.held_out import held_out_lines, held_out_scorer, search_test
from hfsweep.driver.results.report import write_report
from hfsweep.driver.results.summary import sweep_summary
from hfsweep.driver.search.budget import SweepBudget
from hfsweep.driver.search.checkpoint_budget import checkpoint_disk_use
from hfsweep.driver.search.live_study import close_lost_trials
from hfsweep.driver.search.schedulers import drawn_at_random, startup_trials
from hfsweep.models import build_model
from hfsweep.tasks.data_hooks import examples_collator


def finish(
    results: tune.ResultGrid,
    sweep: SweepConfig,
    task,
    data: PreparedData,
    budget: Optional[SweepBudget] = None,
    earlier: list[tune.ResultGrid] = (),
) -> tune.ResultGrid:
    """Best trial (over the `earlier` experiments' trials too, for an extended sweep), exported
    model, tables and plots, and the one-screen summary (which says whether the sweep ended on its budget)."""
    if results.num_terminated == 0:
        raise RuntimeError(f"no trial finished ({results.num_errors} errored); see the errors above.")
    storage = sweep.cluster.storage_path
    trials = [result for grid in (*earlier, results) for result in grid]
    best = best_of([*earlier, results], sweep)
    if not sweep.select.top_k and (score := held_out_scorer(sweep, task)):  # a selection scores its own runs
        best = replace(best, test=search_test(trials, best, sweep, score))
    selected = sweep.select.top_k and selection_finished(storage)  # a resumed sweep: best/ stays its winner
    if not selected:
        write_best(best, storage)
    # the tables and plots (pandas and matplotlib: no torch, no RNG) are drawn beside the model work
    with ThreadPoolExecutor(1, thread_name_prefix="hfsweep-report") as beside:
        report = beside.submit(write_report, storage)
        if not selected:
            export_best(best, sweep, task, os.path.join(storage, "best"), data.label_names)
        untrained_loss = untrained_eval_loss(sweep, task, data)
        table = report.result()
    print(
        sweep_summary(
            best,
            table,
            sweep,
            untrained_loss=untrained_loss,
            perplexity=task.reports_perplexity,
            startup=startup_trials(sweep),
            drawn_at_random=drawn_at_random(sweep, [result.metrics_dataframe for result in (*earlier, results)[0]]),
            budget=budget,
            checkpoints=checkpoint_disk_use(result.metrics_dataframe for result in results),
            exported=not selected,
        )
    )
    for line in held_out_lines(best.test, best.metric):
        print(f"  {line}")
    unfinished = int(table["ended"].isin(UNFINISHED).sum())
    if not unfinished and (lost := close_lost_trials(sweep)):
        print(f"hfsweep: study: {lost} lost trial(s) marked FAIL: asked for by a killed run, then asked again")
    if sweep.select.top_k and unfinished:
        print(
            f"hfsweep: select: not run: the search was interrupted with {unfinished} trials unfinished; "
            f"python -m hfsweep.resume {storage} finishes it, then selects"
        )
    elif sweep.select.top_k:
        select_over_seeds(trials, sweep, task, data, budget, search_cost=table.get("cost_usd"))
    return results


def best_of(grids: list[tune.ResultGrid], sweep: SweepConfig) -> BestTrial:
    """The best trial over several experiments; of equal values the later experiment's, as Tune ranks equal scores."""
    bests = [best_trial(grid, sweep) for grid in grids if grid.num_terminated]
    sign = 1 if sweep.mode == "max" else -1
    return max(reversed(bests), key=lambda best: sign * best.value)


def untrained_eval_loss(sweep: SweepConfig, task, data: PreparedData) -> float:
    """The validation loss of the model every trial starts from (same seed), as a baseline."""
    from transformers import set_seed

    tokenizer = task.load_processor(data.tokenizer_path)
    set_seed(sweep.seed)
    model = build_model(sweep.model, tokenizer, data.label_names, task=task)
    return evaluate_model(
        model, tokenizer, data.validation_path, data_collator=examples_collator(task, sweep.data_collator, tokenizer)
    )
