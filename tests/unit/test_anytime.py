"""Anytime curves: best so far against trial-hours, their area, the trial-hours to reach the
defaults trial. (`python -m hfsweep.report DIR1 DIR2 --compare OUT` over real Tune experiments:
tests/e2e/test_anytime_e2e.py.)"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from hfsweep.config.schema import SweepConfig, typed
from hfsweep.driver.results.anytime import anytime_curve, area, hours_to_reach, summary_row

# Two trials on 2 CPUs each: a reports 5.0 then 3.0 at 10 s and 20 s of its time; b reports 4.0 at 10 s.
HISTORIES = {
    "a": pd.DataFrame({"timestamp": [100, 120], "time_total_s": [10.0, 20.0], "eval_loss": [5.0, 3.0]}),
    "b": pd.DataFrame({"timestamp": [110], "time_total_s": [10.0], "eval_loss": [4.0]}),
}


def test_the_curve_sums_every_trials_latest_time_in_report_order_and_keeps_the_best_so_far():
    curve = anytime_curve(HISTORIES, "eval_loss", "min", resources=2)
    assert curve["wall_s"].tolist() == [10, 20, 30]  # a ran from 90 s, b from 100 s, a again from 110 s
    assert curve["trial_hours"].tolist() == pytest.approx([20 / 3600, 40 / 3600, 60 / 3600])
    assert curve["best"].tolist() == [5.0, 4.0, 3.0]
    assert area(curve) == pytest.approx((5.0 + 4.0) / 2)  # each value held until the next report
    assert hours_to_reach(curve, 4.0, "min") == pytest.approx(40 / 3600)
    assert math.isnan(hours_to_reach(curve, 2.0, "min"))
    assert anytime_curve(HISTORIES, "eval_loss", "max", resources=2)["best"].tolist() == [5.0, 5.0, 5.0]


def test_the_wall_clock_leaves_out_the_time_no_trial_ran():
    """Trial a ran 10 s up to 100 s; the sweep was interrupted, resumed at 1000 s, and a ran 10 s
    more from its checkpoint while b ran 5 s."""
    histories = {
        "a": pd.DataFrame({"timestamp": [100, 1010], "time_total_s": [10.0, 20.0], "eval_loss": [5.0, 3.0]}),
        "b": pd.DataFrame({"timestamp": [1005], "time_total_s": [5.0], "eval_loss": [4.0]}),
    }
    assert anytime_curve(histories, "eval_loss", "min", resources=1)["wall_s"].tolist() == [10, 15, 20]


def test_the_wall_clock_counts_a_trial_restored_from_an_earlier_checkpoint():
    """a ran 90-110 s (totals 10, 20), failed, and was restored from its 10 s checkpoint at 195 s:
    its report at 200 s has the total 15 and ran 5 s (Tune's time_this_iter_s), 25 s in all."""
    history = {
        "timestamp": [100, 110, 200],
        "time_total_s": [10.0, 20.0, 15.0],
        "time_this_iter_s": [10.0, 10.0, 5.0],
        "eval_loss": [5.0, 4.0, 3.0],
    }
    curve = anytime_curve({"a": pd.DataFrame(history)}, "eval_loss", "min", resources=1)
    assert curve["wall_s"].tolist() == [10, 20, 25]


def test_the_summary_says_when_the_final_best_was_first_found():
    """a's 5.0 is the best of a mode=max curve from its first report on; 3.0 of a mode=min one only at the last."""
    highest = summary_row("s", anytime_curve(HISTORIES, "eval_loss", "max", resources=2), target=None, mode="max")
    lowest = summary_row("s", anytime_curve(HISTORIES, "eval_loss", "min", resources=2), target=4.0, mode="min")
    assert highest["hours_to_best"] == pytest.approx(20 / 3600) and highest["trial_hours"] == pytest.approx(60 / 3600)
    assert lowest["hours_to_best"] == pytest.approx(60 / 3600)
    assert lowest["hours_to_defaults"] == pytest.approx(40 / 3600)


def sweeps(root, *names) -> list[str]:
    """Run directories that `python -m hfsweep.report` takes for sweeps (they hold resolved_config.yaml)."""
    import yaml

    dirs = []
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "resolved_config.yaml").write_text(yaml.safe_dump({"metric": "eval_loss", "mode": "min"}))
        dirs.append(str(root / name))
    return dirs


def test_two_sweeps_whose_run_directories_end_alike_keep_a_curve_each(tmp_path, monkeypatch):
    from hfsweep.cli import report

    drawn = {}
    curve = anytime_curve(HISTORIES, "eval_loss", "min", resources=2)
    monkeypatch.setattr(
        report,
        "sweep_anytime",
        lambda run_dir: (curve, None, typed(SweepConfig, {"metric": "eval_loss", "mode": "min"})),
    )
    monkeypatch.setattr(report, "plot_anytime", lambda curves, metric, path: drawn.update(curves))
    run_dirs = sweeps(tmp_path, "round1/tpe/seed_1", "round2/tpe/seed_1", "round2/random/seed_1")
    assert report.main([*run_dirs, "--compare", str(tmp_path / "out")]) == 0
    assert sorted(drawn) == ["round1/tpe/seed_1", "round2/random/seed_1", "round2/tpe/seed_1"]
    assert pd.read_csv(tmp_path / "out" / "anytime.csv")["sweep"].is_unique


def test_a_compare_folder_that_is_a_file_or_missing_is_refused_in_one_line(tmp_path, capsys):
    from hfsweep.cli.report import main

    run_dirs = sweeps(tmp_path, "a", "b")
    (tmp_path / "a" / "results.csv").write_text("trial_id\n")
    assert main([*run_dirs, "--compare", str(tmp_path / "a" / "results.csv")]) == 2
    assert capsys.readouterr().err == (
        f"hfsweep.report: error: --compare {tmp_path / 'a' / 'results.csv'}: is a file; give the folder to write the "
        f"comparison in, e.g. --compare comparison.\n"
    )
    with pytest.raises(SystemExit) as ended:
        main([*run_dirs, "--compare"])
    assert ended.value.code == 2
    assert capsys.readouterr().err == (
        "hfsweep.report: error: argument --compare: expected one argument; see python -m hfsweep.report --help.\n"
    )
