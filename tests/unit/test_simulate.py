"""`python -m hfsweep.simulate`: bad input is refused in one line. (Playbacks of real Tune recordings
through real Tune schedulers: tests/e2e/test_simulate_e2e.py.)"""

from __future__ import annotations

import pytest

from hfsweep.cli.simulate import main
from hfsweep.run_dir import write_config


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{tmp}/missing", "scheduler=asha"], "no such directory"),
        (["{tmp}", "scheduler=asha"], "neither a sweep's run directory"),
        (["{run}", "scheduler=asha"], "no results"),
        (["{run}", "scheduler=ashaa"], "scheduler=ashaa: no such option (did you mean 'asha'?)"),
        (["{run}", "scheduler=asha", "scheduler.grace_perio=5"], "did you mean 'grace_period'?"),
        (["{run}", "search_alg=random"], "search_alg: a simulation runs the recorded configs only"),
        (["{run}"], "scheduler: name the scheduler to simulate"),
    ],
)
def test_bad_input_is_refused_in_one_line(argv, message, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    write_config(str(run), {"name": "sweep", "metric": "score", "mode": "max"})  # a sweep that never ran
    assert main([a.format(tmp=tmp_path, run=run) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("hfsweep.simulate: error: ") and message in err
