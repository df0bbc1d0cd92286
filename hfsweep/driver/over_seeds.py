"""The selection over seeds (`select.top_k`): after the search, its best configurations (and the
defaults) re-trained once per seed, as one sweep of its own in RUN_DIR/select/; the winner is the
best mean (`hfsweep.driver.results.select` ranks and tabulates)."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Optional

import pandas as pd
from ray import tune

from hfsweep.config.schema import SweepConfig, plain
from hfsweep.data.prepared import PreparedData
from hfsweep.driver.loggers import build_loggers
from hfsweep.driver.ray_cluster import searcher_cap
from hfsweep.driver.results.best import write_best
from hfsweep.driver.results.export import export_best
from hfsweep.driver.results.held_out import held_out_lines, held_out_scorer
from hfsweep.driver.results.report import write_report
from hfsweep.driver.results.select import (
    candidates_from,
    rank,
    retrained,
    score_on_test,
    selection_config,
    selection_points,
    selection_summary,
    top_configurations,
    winner_checkpoint,
    write_selection,
)
from hfsweep.driver.results.summary import selection_spend_lines
from hfsweep.driver.search.budget import SweepBudget
from hfsweep.driver.search.checkpoint_budget import build_checkpoint_budget
from hfsweep.driver.search.defaults_trial import defaults_values, is_defaults
from hfsweep.driver.search.defaults_trial import wanted as defaults_trial_wanted
from hfsweep.driver.search.schedulers import build_scheduler, build_stopper
from hfsweep.driver.search.search_space import compile_search_space
from hfsweep.driver.tuner import SearchSetup, SweepPlan, build_tuner, trainable_for, tune_fit
from hfsweep.run_dir import SELECT_DIR, SELECTION_FILE, write_config

# what results.csv says of trials a Ctrl-C left (Tune's fit returns after it)
UNFINISHED = ("running", "pending", "paused")
CUT_SHORT = ("stopped by scheduler/stopper", "never started")  # a selection's runs, by the budget (no scheduler)


def selection_finished(storage: str) -> bool:
    """Whether the run directory holds a finished selection, whose winner `best/` and `best.json` are."""
    return os.path.exists(os.path.join(storage, SELECT_DIR, SELECTION_FILE))


def select_over_seeds(
    trials: list[tune.Result],
    sweep: SweepConfig,
    task,
    data: PreparedData,
    budget: Optional[SweepBudget] = None,
    search_cost: Optional[pd.Series] = None,
) -> None:
    """Re-train the search's `select.top_k` best configurations (of its `trials`, an extended sweep's
    earlier experiments' included) once per seed, as one sweep in
    RUN_DIR/select/ on the same data; best/ and best.json become the winner's (best mean) median seed.
    A budget bounds the selection too: it draws on what the search left (the same ledger), and is
    skipped when the search spent it all; with `select.within_budget=false` it bounds the search alone."""
    storage = sweep.cluster.storage_path
    out = os.path.join(storage, SELECT_DIR)
    if not sweep.select.within_budget:  # the budget priced the search; the selection measures its winner
        budget = None
    if selection_finished(storage):  # a resumed sweep whose selection ran already
        print(
            f"hfsweep: {out} holds a finished selection: it is not run again, and best/ stays its winner "
            f"(move it away to select anew)"
        )
        return
    if budget is not None and budget.reason:
        print(
            f"hfsweep: select: skipped: the search spent the sweep's budget ({budget.reason}); raise it to "
            f"re-train the top {sweep.select.top_k} over seeds"
        )
        return
    top = top_configurations(trials, sweep, sweep.select.top_k)
    defaults = defaults_values(sweep) if defaults_trial_wanted(sweep) else None
    beside = defaults is not None and not any(is_defaults(c, defaults) for c in top)
    configurations = [*top, *([defaults] if beside else [])]  # the defaults re-trained beside the top K
    sub = selection_config(sweep, configurations, out)
    param_space = compile_search_space(sub.search_space, sub)
    seeds = sub.select.seeds
    experiment = os.path.join(out, sub.name)
    trainable = trainable_for(sub, task, data)
    if tune.Tuner.can_restore(experiment):  # a selection cut short (a session's end): Tune continues it
        print(f"hfsweep: select: continuing the selection in {out}: finished runs are kept")
        tuner = tune.Tuner.restore(experiment, trainable, resume_errored=True, param_space=param_space)
    else:
        os.makedirs(out, exist_ok=True)
        write_config(out, plain(sub))
        print(f"hfsweep: select: re-training {retrained(len(top), beside)} over seeds {seeds} in {out}")
        points = selection_points(sweep, configurations)
        setup = SearchSetup(searcher_arguments={"points_to_evaluate": points}, num_samples=len(points))
        stopper = build_stopper(sub, *filter(None, [budget]))
        callbacks = [*build_loggers(sub), *filter(None, [budget, build_checkpoint_budget(sub)])]
        plan = SweepPlan(sub, task, param_space, build_scheduler(sub, param_space), stopper, callbacks, data, setup)
        tuner = build_tuner(plan, trainable, searcher_cap(sub))
    reruns = tune_fit(tuner)
    rerun_table = write_report(out)
    for line in selection_spend_lines(rerun_table, search_cost, budget):
        print(line)
    cut = int(rerun_table["ended"].isin((*UNFINISHED, *CUT_SHORT)).sum())
    if cut:  # a mean over seeds cut short at different steps ranks no configuration
        why = f"the sweep's budget ({budget.reason})" if budget is not None and budget.reason else "an interruption"
        print(
            f"hfsweep: select: {cut} of {len(rerun_table)} runs were cut short by {why}: no winner is picked, and "
            f"best/ stays the search's best trial"
        )
        return
    errored = int((rerun_table["ended"] == "errored").sum())
    if errored:
        print(
            f"hfsweep: select: {errored} of {len(rerun_table)} runs errored (see select/results.md): each "
            f"configuration is ranked on the seeds that finished"
        )
    model = sweep.select.model.value  # final or best
    candidates = candidates_from(reruns, sub, configurations, model)
    defaults = next((c for c in configurations if defaults is not None and is_defaults(c, defaults)), None)
    selection = rank(candidates, sweep.metric, sweep.mode, sweep.select.confidence, defaults, model)
    best = winner_checkpoint(selection)
    if score := held_out_scorer(sweep, task):
        best = replace(best, test=score_on_test(selection, sweep.data.test_split, score))
    write_best(best, storage)
    export_best(best, sweep, task, os.path.join(storage, "best"), data.label_names)
    write_selection(selection, out)
    write_report(storage)  # results.md now ends with the selection
    print(selection_summary(selection, os.path.join(storage, "best")))
    for line in held_out_lines(best.test, best.metric):
        print(f"  {line}")
