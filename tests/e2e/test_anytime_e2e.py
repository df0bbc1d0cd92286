"""`python -m hfsweep.report DIR1 DIR2 --compare OUT` over real Tune experiments, end to end."""

from __future__ import annotations

import pandas as pd


def test_report_compare_draws_two_sweeps_on_one_plot_with_their_numbers(ray_cluster, tmp_path, capsys):
    from ray import tune

    from hfsweep.cli.report import main as report_main
    from hfsweep.run_dir import write_config
    from tests.conftest import resolved_config

    def trainable(config):
        for step, loss in enumerate(config["losses"]):
            tune.report({"eval_loss": loss, "step": step * 10})

    runs = {"fast": [[3.0, 2.0], [4.0, 3.5]], "slow": [[5.0, 4.5], [4.0, 3.9]]}
    for method, losses in runs.items():
        run_dir = tmp_path / method / "seed_1"
        run_dir.mkdir(parents=True)
        cfg = resolved_config([], run_dir, tmp_path)
        write_config(str(run_dir), cfg)
        tune.Tuner(
            trainable,
            param_space={"losses": tune.grid_search(losses)},
            tune_config=tune.TuneConfig(max_concurrent_trials=1),
            run_config=tune.RunConfig(name=cfg["name"], storage_path=str(run_dir), verbose=0),
        ).fit()
    out = tmp_path / "compare"
    assert (
        report_main([str(tmp_path / "fast" / "seed_1"), str(tmp_path / "slow" / "seed_1"), "--compare", str(out)]) == 0
    )
    table = pd.read_csv(out / "anytime.csv").set_index("sweep")
    assert table.loc["fast/seed_1", "final_best"] == 2.0 and table.loc["slow/seed_1", "final_best"] == 3.9
    assert table.loc["fast/seed_1", "area"] < table.loc["slow/seed_1", "area"]
    # fast found its best (2.0) in its first trial, before its second trial ran; slow at its last report
    assert table.loc["fast/seed_1", "hours_to_best"] < table.loc["fast/seed_1", "trial_hours"]
    assert table.loc["slow/seed_1", "hours_to_best"] == table.loc["slow/seed_1", "trial_hours"]
    assert (out / "anytime.png").stat().st_size > 10_000 and "area" in (out / "anytime.md").read_text()
    assert report_main([str(tmp_path / "fast" / "seed_1"), str(tmp_path / "nowhere"), "--compare", str(out)]) == 2
    assert "holds no sweep" in capsys.readouterr().err


def test_a_sweeps_report_keeps_its_anytime_curve_and_says_when_it_found_its_best(ray_cluster, tmp_path):
    """results.md's line and anytime_curve.csv, which `hfsweep.glue --fair` reads from committed artefacts."""
    from ray import tune

    from hfsweep.cli.report import main as report_main
    from hfsweep.run_dir import write_config
    from tests.conftest import resolved_config

    def trainable(config):
        for step, loss in enumerate(config["losses"]):
            tune.report({"eval_loss": loss, "step": step * 10})

    cfg = resolved_config([], tmp_path, tmp_path / "cache")
    write_config(str(tmp_path), cfg)
    tune.Tuner(
        trainable,
        param_space={"losses": tune.grid_search([[3.0, 2.0], [4.0, 3.5]])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(name=cfg["name"], storage_path=str(tmp_path), verbose=0),
    ).fit()
    assert report_main([str(tmp_path)]) == 0
    curve = pd.read_csv(tmp_path / "anytime_curve.csv")
    assert list(curve.columns) == ["wall_s", "trial_hours", "best"] and len(curve) == 4
    assert curve["best"].tolist() == [3.0, 2.0, 2.0, 2.0]
    found, total = curve["trial_hours"].iloc[1], curve["trial_hours"].iloc[-1]
    assert (
        f"Best eval_loss 2, first reached after {found:.4g} of the sweep's {total:.4g} trial-hours"
        in (tmp_path / "results.md").read_text()
    )
