"""Picking a winner over seeds (`select.top_k`): after the search, its K best configurations are
re-trained once per seed as one sweep in RUN_DIR/select/ (a grid over configuration × seed, each run
to its last step, as replay trains), and the winner is the configuration with the best mean, not the
best single run: fine-tuning results vary with the seed as much as with many hyperparameters
(Dodge et al. 2020). Each mean comes with a Student t interval, and the winner is tested against
the runner-up with a t-test paired by seed."""

from __future__ import annotations

import copy
import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
from scipy import stats

from hfsweep.config.paths import nested
from hfsweep.driver.results.best import BestTrial, best_of_trial
from hfsweep.driver.results.rerun import RUN_TO_THE_END
from hfsweep.driver.results.tables import markdown
from hfsweep.run_dir import SELECTION_FILE, SELECTION_TABLE


def top_configurations(results, cfg: dict, k: int) -> list[dict]:
    """The k best distinct configurations of the search (dotted path -> value), best first, each
    ranked by its best trial's best checkpoint, as the search's best trial is chosen."""
    finished = [best_of_trial(result, cfg) for result in results if result.best_checkpoints]
    configurations = []
    for trial in sorted(finished, key=lambda t: t.value, reverse=cfg["mode"] == "max"):
        if trial.hyperparameters not in configurations:
            configurations.append(trial.hyperparameters)
    return configurations[:k]


def retrained(best: int, with_defaults: bool) -> str:
    """What a selection re-trains, in words: its `best` configurations, and the defaults trial's
    counted apart where it is re-trained beside them, not as one of the best."""
    what = "the best configuration" if best == 1 else f"the {best} best configurations"
    return f"{what} and the defaults trial's" if with_defaults else what


def selection_config(cfg: dict, configurations: list[dict], out: str) -> dict:
    """The sweep's config re-training each configuration once per `select.seeds`: a grid over
    their values and the seeds, of which `selection_points` are run."""
    values = {path: list(dict.fromkeys(c[path] for c in configurations)) for path in configurations[0]}
    sub = {**copy.deepcopy(cfg), **copy.deepcopy(RUN_TO_THE_END)}
    sub["search_space"] = nested(
        {
            **{p: {"sampler": "grid", "values": v} for p, v in values.items()},
            "seed": {"sampler": "grid", "values": list(cfg["select"]["seeds"])},
        }
    )
    sub["select"] = {**cfg["select"], "top_k": 0}
    sub["cluster"]["storage_path"] = out
    return sub


def selection_points(cfg: dict, configurations: list[dict]) -> list[dict]:
    """Each configuration once per seed, as the variant generator's `points_to_evaluate` (a
    configuration is a tuple of values, not a product of them); handed to the searcher as
    objects, not through the config, where Hydra would make them DictConfigs."""
    seeds = cfg["select"]["seeds"]
    return [nested({**configuration, "seed": seed}) for configuration in configurations for seed in seeds]


def confidence_interval(values: list[float], confidence: float) -> tuple[float, float, float]:
    """Mean and Student t interval: mean ± t((1 + confidence) / 2, n - 1) · s / √n; no interval for one value."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf((1 + confidence) / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))
    return mean, mean - half, mean + half


@dataclass
class Candidate:
    """One configuration's results over seeds: seed -> its best value of the metric, and its trials."""

    hyperparameters: dict
    scores: dict
    runs: dict = field(default_factory=dict)  # seed -> BestTrial
    mean: float = math.nan
    low: float = math.nan
    high: float = math.nan


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
    candidates: list[Candidate], metric: str, mode: str, confidence: float, defaults: Optional[dict] = None
) -> Selection:
    """Rank configurations by their mean over seeds; test the winner against the runner-up, and
    against the `defaults` configuration, paired by seed."""
    scored = [c for c in candidates if c.scores]
    if not scored:
        raise RuntimeError("select: no re-trained run finished; see the errors above.")
    for c in scored:
        c.mean, c.low, c.high = confidence_interval(list(c.scores.values()), confidence)
    ranked = sorted(scored, key=lambda c: c.mean, reverse=mode == "max")
    paired, p_value = paired_p_value(ranked[0], ranked[1]) if len(ranked) > 1 else ([], math.nan)
    selection = Selection(ranked, metric, mode, confidence, paired, p_value)
    selection.defaults = next((c for c in scored if defaults is not None and c.hyperparameters == defaults), None)
    if selection.defaults is not None and selection.defaults is not ranked[0]:
        selection.defaults_p_value = paired_p_value(ranked[0], selection.defaults)[1]
    return selection


def candidates_from(results, sub: dict, configurations: list[dict]) -> list[Candidate]:
    """The re-training's runs grouped by configuration: each run's best checkpoint and its score."""
    candidates = [Candidate(hyperparameters=c, scores={}) for c in configurations]
    for result in results:
        if not result.best_checkpoints:
            continue
        run = best_of_trial(result, sub)
        seed = run.hyperparameters.pop("seed")
        candidate = next(c for c in candidates if c.hyperparameters == run.hyperparameters)
        candidate.scores[seed], candidate.runs[seed] = run.value, run
    return candidates


def winner_checkpoint(selection: Selection) -> BestTrial:
    """best.json's entry: the winner's median seed's best checkpoint, with the selection's numbers."""
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
            "runner_up": selection.ranked[1].hyperparameters if len(selection.ranked) > 1 else None,
            "paired_seeds": selection.paired_seeds,
            "p_value": selection.p_value,
        },
    )


def selection_table(selection: Selection) -> pd.DataFrame:
    """One row per configuration, best mean first: its values, score per seed, mean and interval."""
    seeds = sorted({s for c in selection.ranked for s in c.scores})
    ci = f"ci{selection.confidence:.0%}"
    return pd.DataFrame(
        [
            {
                "rank": i + 1,
                **c.hyperparameters,
                "defaults": c is selection.defaults,
                **{f"seed_{s}": c.scores.get(s) for s in seeds},
                "n": len(c.scores),
                f"mean_{selection.metric}": c.mean,
                f"{ci}_low": c.low,
                f"{ci}_high": c.high,
            }
            for i, c in enumerate(selection.ranked)
        ]
    )


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
        f"in mean {selection.metric}; paired t-test by seed p = {p}"
    ]


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
        f"Winner by mean {selection.metric} over seeds ({selection.mode}), "
        f"best/ from its median seed {selection.median_seed()}; {paired_test_line(selection)}.",
        *defaults_lines(selection),
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
        f"mean {selection.metric} ± half-width of its {selection.confidence:.0%} Student t interval"
    ]
    lines += [
        f"  {'winner:' if i == 0 else f'{i + 1}.    '} {describe(c.hyperparameters)}: "
        f"{interval_text(c, selection.confidence)}"
        for i, c in enumerate(selection.ranked)
    ]
    lines.append(f"  {paired_test_line(selection)}")
    lines += [f"  {line}" for line in defaults_lines(selection)]
    lines += [f"  {line}" for line in filter(None, [single_seed_line(selection)])]
    lines.append(
        f"  exported model:  {best_dir} (the winner's median seed {seed}: trial {run.trial_id}, "
        f"{run.metric} = {run.value:.4f} at step {run.step})"
    )
    return "\n".join(lines)
