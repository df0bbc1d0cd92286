"""Picking a winner over seeds (`select.top_k`): after the search, its K best configurations are
re-trained once per seed as one sweep in RUN_DIR/select/ (a grid over configuration × seed, each run
to its last step, as replay trains), and the winner is the configuration with the best mean, not the
best single run: fine-tuning results vary with the seed as much as with many hyperparameters
(Dodge et al. 2020). Each mean comes with a Student t interval, and the winner is tested against
the runner-up with a t-test paired by seed. Every run is scored at both its final model (run_glue.py's
convention) and its best checkpoint by the validation metric; `select.model` says which one ranks,
is exported and headlines, and every column says which one it holds."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
from scipy import stats

from hfsweep.config.paths import nested
from hfsweep.config.schema import BudgetConfig, SweepConfig
from hfsweep.driver.results.best import BestTrial, best_of_trial, final_of_trial, score_key
from hfsweep.driver.results.held_out import held_out_name, held_out_record, mean_scores, over_seeds, scored
from hfsweep.driver.results.rerun import RUN_TO_THE_END
from hfsweep.driver.results.tables import markdown
from hfsweep.run_dir import SELECTION_FILE, SELECTION_TABLE


def top_configurations(results, sweep: SweepConfig, k: int) -> list[dict]:
    """The k best distinct configurations of the search (dotted path -> value), best first, each
    ranked by its best trial's best checkpoint, as the search's best trial is chosen."""
    finished = [best_of_trial(result, sweep) for result in results if result.best_checkpoints]
    configurations = []
    for trial in sorted(finished, key=lambda t: score_key(t.value, sweep.mode), reverse=True):
        if trial.hyperparameters not in configurations:
            configurations.append(trial.hyperparameters)
    return configurations[:k]


def retrained(best: int, with_defaults: bool) -> str:
    """What a selection re-trains, in words: its `best` configurations, and the defaults trial's
    counted apart where it is re-trained beside them, not as one of the best."""
    what = "the best configuration" if best == 1 else f"the {best} best configurations"
    return f"{what} and the defaults trial's" if with_defaults else what


def selection_config(sweep: SweepConfig, configurations: list[dict], out: str) -> SweepConfig:
    """The sweep's config re-training each configuration once per `select.seeds` (`RUN_TO_THE_END`):
    a grid over their values and the seeds, of which `selection_points` are run, in `out`."""
    values = {path: list(dict.fromkeys(c[path] for c in configurations)) for path in configurations[0]}
    return replace(
        sweep,
        **{**RUN_TO_THE_END, "budget": BudgetConfig()},
        search_space=nested(
            {
                **{p: {"sampler": "grid", "values": v} for p, v in values.items()},
                "seed": {"sampler": "grid", "values": list(sweep.select.seeds)},
            }
        ),
        select=replace(sweep.select, top_k=0),
        cluster=replace(sweep.cluster, storage_path=out),
        checkpoints=replace(sweep.checkpoints, keep_final=True),  # each run's final model is scored
    )


def selection_points(sweep: SweepConfig, configurations: list[dict]) -> list[dict]:
    """Each configuration once per seed, as the variant generator's `points_to_evaluate` (a
    configuration is a tuple of values, not a product of them); handed to the searcher as
    objects, not through the config, where Hydra would make them DictConfigs."""
    seeds = sweep.select.seeds
    return [nested({**configuration, "seed": seed}) for configuration in configurations for seed in seeds]


def confidence_interval(values: list[float], confidence: float) -> tuple[float, float, float]:
    """Mean and Student t interval: mean ± t((1 + confidence) / 2, n - 1) · s / √n; no interval for one value."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf((1 + confidence) / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))
    return mean, mean - half, mean + half


MODELS = ("final", "best")  # a run's final model and its best checkpoint, as select.model names them


@dataclass
class Candidate:
    """One configuration's results over seeds: seed -> the ranked model's value of the metric, and its
    trials; both models' values, the final models, and their test scores (held_out)."""

    hyperparameters: dict
    scores: dict
    runs: dict = field(default_factory=dict)  # seed -> the ranked model's BestTrial
    mean: float = math.nan
    low: float = math.nan
    high: float = math.nan
    values: dict = field(default_factory=lambda: {model: {} for model in MODELS})  # model -> seed -> value
    finals: dict = field(default_factory=dict)  # seed -> the final model's BestTrial
    test: dict = field(default_factory=dict)  # seed -> its final model's test scores


@dataclass
class Selection:
    ranked: list[Candidate]  # best mean first
    metric: str
    mode: str
    confidence: float
    paired_seeds: list[int]  # seeds both winner and runner-up finished
    p_value: float  # the paired t-test of winner against runner-up; nan without one, or under 2 seeds in common
    defaults: Optional[Candidate] = None  # the config's own values, re-trained beside the top K
    defaults_p_value: float = math.nan  # the paired t-test of winner against the defaults
    model: str = "final"  # the model the scores are of: select.model

    @property
    def winner(self) -> Candidate:
        return self.ranked[0]

    def median_seed(self) -> int:
        """The winner's median seed by score (of an even count, the better of the two middle ones)."""
        ordered = sorted(self.winner.scores, key=self.winner.scores.get, reverse=self.mode == "max")
        return ordered[(len(ordered) - 1) // 2]


def paired_p_value(a: Candidate, b: Candidate) -> tuple[list[int], float]:
    """The seeds both finished, and the paired t-test of their scores (nan under two seeds)."""
    paired = sorted(set(a.scores) & set(b.scores))
    if len(paired) < 2:
        return paired, math.nan
    return paired, float(stats.ttest_rel([a.scores[s] for s in paired], [b.scores[s] for s in paired]).pvalue)


def rank(
    candidates: list[Candidate],
    metric: str,
    mode: str,
    confidence: float,
    defaults: Optional[dict] = None,
    model: str = "final",
) -> Selection:
    """Rank configurations by their mean over seeds (of `model`, the scores `candidates_from` made
    theirs); test the winner against the runner-up, and against the `defaults` configuration,
    paired by seed."""
    scored = [c for c in candidates if c.scores]
    if not scored:
        raise RuntimeError("select: no re-trained run finished; see the errors above.")
    for c in scored:
        c.mean, c.low, c.high = confidence_interval(list(c.scores.values()), confidence)
    ranked = sorted(scored, key=lambda c: score_key(c.mean, mode), reverse=True)  # a NaN seed's mean last
    paired, p_value = paired_p_value(ranked[0], ranked[1]) if len(ranked) > 1 else ([], math.nan)
    selection = Selection(ranked, metric, mode, confidence, paired, p_value, model=model)
    selection.defaults = next((c for c in scored if defaults is not None and c.hyperparameters == defaults), None)
    if selection.defaults is not None and selection.defaults is not ranked[0]:
        selection.defaults_p_value = paired_p_value(ranked[0], selection.defaults)[1]
    return selection


def candidates_from(results, sub: dict, configurations: list[dict], model: str = "final") -> list[Candidate]:
    """The re-training's runs grouped by configuration: each run's final model and best checkpoint
    with their scores; `model`'s rank. A run that errored (a diverged loss, out of memory) has no
    final model, whatever it saved before: its seed is left out, as a run that never finished."""
    candidates = [Candidate(hyperparameters=c, scores={}) for c in configurations]
    for result in results:
        if result.error is not None or not result.best_checkpoints:
            continue
        runs = {"final": final_of_trial(result, sub), "best": best_of_trial(result, sub)}
        seed = runs["final"].hyperparameters.pop("seed")
        runs["best"].hyperparameters.pop("seed")
        candidate = next(c for c in candidates if c.hyperparameters == runs["final"].hyperparameters)
        for name, run in runs.items():
            candidate.values[name][seed] = run.value
        candidate.finals[seed] = runs["final"]
        candidate.scores[seed], candidate.runs[seed] = runs[model].value, runs[model]
    return candidates


def score_on_test(selection: Selection, split: str, score) -> dict:
    """The final models of the winner and of the defaults, each seed's, scored on the test split
    (into their candidates' `test`, which selection.csv shows); best.json's record of them."""
    records = {}
    for who, candidate in (("winner", selection.winner), ("defaults", selection.defaults)):
        if candidate is not None and not candidate.test:  # the defaults may have won
            candidate.test = {seed: scored(run, score) for seed, run in sorted(candidate.finals.items())}
        records[who] = over_seeds(candidate.test) if candidate is not None else None
    return held_out_record(split, records["winner"], records["defaults"])


def winner_checkpoint(selection: Selection) -> BestTrial:
    """best.json's entry: the winner's median seed's model of `select.model`, with the selection's numbers."""
    seed = selection.median_seed()
    winner = selection.winner
    return dataclasses.replace(
        winner.runs[seed],
        seed=seed,
        selection={
            "seeds": sorted(winner.scores),
            "scores": {str(s): v for s, v in sorted(winner.scores.items())},
            "mean": winner.mean,
            "interval": [winner.low, winner.high],
            "confidence": selection.confidence,
            "model": selection.model,
            "runner_up": selection.ranked[1].hyperparameters if len(selection.ranked) > 1 else None,
            "paired_seeds": selection.paired_seeds,
            "p_value": selection.p_value,
        },
    )


def selection_table(selection: Selection) -> pd.DataFrame:
    """One row per configuration, best mean first: its values, then per model (`MODELS`, the ranked
    one first) its score per seed and mean, the ranked model's interval, and the final models' test
    scores where they were scored (a test split: the winner's and the defaults')."""
    seeds = sorted({s for c in selection.ranked for s in c.scores})
    ci = f"{selection.model}_ci{selection.confidence:.0%}"
    models = sorted(MODELS, key=lambda m: m != selection.model)
    rows = []
    for i, c in enumerate(selection.ranked):
        row = {"rank": i + 1, **c.hyperparameters, "defaults": c is selection.defaults, "n": len(c.scores)}
        for model in models:
            row.update({f"{model}_seed_{s}": c.values[model].get(s) for s in seeds})
            row[f"mean_{model}_{selection.metric}"] = c.mean if model == selection.model else mean(c.values[model])
        row.update({f"{ci}_low": c.low, f"{ci}_high": c.high})
        if c.test:
            name = held_out_name(selection.metric)
            row.update({f"test_seed_{s}": c.test[s].get(name) for s in seeds if s in c.test})
            row.update({f"mean_{k}": v for k, v in mean_scores(c.test).items()})
        rows.append(row)
    return pd.DataFrame(rows)


def mean(values: dict) -> float:
    return float(np.mean(list(values.values()))) if values else math.nan


def ranking_columns(table: pd.DataFrame) -> tuple[list[str], str, str]:
    """A selection.csv's per-seed columns and mean column of the ranked model (the one with the
    interval, `final_ci95_low`), and the metric; in a table written before both models were
    scored, the best checkpoint's (`seed_1`, `mean_METRIC`)."""
    ranked = next((m for m in MODELS if any(c.startswith(f"{m}_ci") for c in table)), None)
    prefix = f"{ranked}_" if ranked else ""
    (mean_column,) = [c for c in table if c.startswith(f"mean_{prefix}")]
    seeds = [c for c in table if c.startswith(f"{prefix}seed_")]
    return seeds, mean_column, mean_column.removeprefix(f"mean_{prefix}")


def hyperparameter_columns(table: pd.DataFrame) -> list[str]:
    """A selection.csv's searched keys: the columns between `rank` and `defaults`."""
    return list(table.columns[1 : table.columns.get_loc("defaults")])


def paired_test_line(selection: Selection) -> str:
    if len(selection.ranked) < 2:
        return "one configuration finished: no runner-up to test against"
    if math.isnan(selection.p_value):
        common = len(selection.paired_seeds)
        return f"paired t-test against the runner-up: not defined ({common} seeds in common, or equal differences)"
    seeds = ", ".join(map(str, selection.paired_seeds))
    return f"paired t-test (by seed: {seeds}) of the winner against the runner-up: p = {selection.p_value:.3g}"


def defaults_lines(selection: Selection) -> list[str]:
    """The winner against the config's own values over the same seeds: the gain a user sees."""
    d = selection.defaults
    if d is None:
        return []
    if d is selection.winner:
        return ["the defaults (the config's own values) won: the search found nothing better over these seeds"]
    gain = (selection.winner.mean - d.mean) * (1 if selection.mode == "max" else -1)
    p = (
        "not defined (under 2 seeds in common)"
        if math.isnan(selection.defaults_p_value)
        else f"{selection.defaults_p_value:.3g}"
    )
    return [
        f"against the defaults ({describe(d.hyperparameters)}: {d.mean:.4f}): the winner is {gain:+.4g} better "
        f"in mean {selection.metric} of the {model_words(selection.model)}; paired t-test by seed p = {p}"
    ]


def model_words(model: str) -> str:
    """What a score's model is, in the words the summary and tables use."""
    return {"final": "final models", "best": "best checkpoints (by validation)"}[model]


def other_model_line(selection: Selection) -> str:
    """The winner's (and the defaults') mean at the model that does not rank: both are stated."""
    other = next(m for m in MODELS if m != selection.model)
    means = [("winner", selection.winner)]
    if selection.defaults is not None and selection.defaults is not selection.winner:
        means.append(("defaults", selection.defaults))
    values = "; ".join(f"{who} {mean(c.values[other]):.4f}" for who, c in means)
    return f"at the {model_words(other)} instead, mean {selection.metric}: {values}"


def single_seed_line(selection: Selection) -> str | None:
    """What a reader must know when the winner has no interval: it finished fewer than two seeds."""
    if len(selection.winner.scores) >= 2:
        return None
    seeds = ", ".join(map(str, sorted(selection.winner.scores)))
    return (
        f"the winner finished one seed only ({seeds}): no interval, its mean is that run's score; re-run the "
        f"seeds that failed (see the errors above), or add seeds (select.seeds)."
    )


def interval_text(c: Candidate, confidence: float) -> str:
    half = (c.high - c.low) / 2
    return f"{c.mean:.4f} ± {half:.4f} ({confidence:.0%} CI [{c.low:.4f}, {c.high:.4f}], n={len(c.scores)})"


def write_selection(selection: Selection, out: str) -> str:
    """selection.csv and selection.md in the selection's directory; returns the Markdown."""
    table = selection_table(selection)
    table.to_csv(os.path.join(out, SELECTION_FILE), index=False)
    lines = [
        f"Winner by mean {selection.metric} of the {model_words(selection.model)} over seeds ({selection.mode}, "
        f"select.model={selection.model}), best/ from its median seed {selection.median_seed()}'s {selection.model} "
        f"model; {paired_test_line(selection)}.",
        *defaults_lines(selection),
        other_model_line(selection),
        *filter(None, [single_seed_line(selection)]),
        "",
        *[
            f"{i + 1}. {describe(c.hyperparameters)}: {interval_text(c, selection.confidence)}"
            for i, c in enumerate(selection.ranked)
        ],
        "",
        markdown(table),
    ]
    text = "\n".join(lines)
    Path(out, SELECTION_TABLE).write_text(text)
    return text


def describe(hyperparameters: dict) -> str:
    return ", ".join(f"{path}={value}" for path, value in hyperparameters.items())


def selection_summary(selection: Selection, best_dir: str) -> str:
    seed = selection.median_seed()
    run = selection.winner.runs[seed]
    lines = [
        f"Selection over seeds {', '.join(map(str, sorted({s for c in selection.ranked for s in c.scores})))}: "
        f"mean {selection.metric} of the {model_words(selection.model)} (select.model={selection.model}) ± "
        f"half-width of its {selection.confidence:.0%} Student t interval"
    ]
    lines += [
        f"  {'winner:' if i == 0 else f'{i + 1}.    '} {describe(c.hyperparameters)}: "
        f"{interval_text(c, selection.confidence)}"
        for i, c in enumerate(selection.ranked)
    ]
    lines.append(f"  {paired_test_line(selection)}")
    lines += [f"  {line}" for line in (*defaults_lines(selection), other_model_line(selection))]
    lines += [f"  {line}" for line in filter(None, [single_seed_line(selection)])]
    lines.append(
        f"  exported model:  {best_dir} (the winner's median seed {seed}: trial {run.trial_id}, its {run.model} "
        f"model, {run.metric} = {run.value:.4f} at step {run.step})"
    )
    return "\n".join(lines)
