"""The live Optuna study of `search_alg.storage` (docs/searching.md, "A live study"). The sweep's
searcher writes it as trials run, and `resume` goes on writing it through the searcher Tune
restores. Kept here is what keeps the study one sweep's record: a new sweep refuses a study that
exists (Optuna would load it and model its trials as this sweep's), and a finished sweep closes the
trials a killed run had asked for but never ran. Light: Optuna is imported only where a study is."""

from __future__ import annotations

from typing import Optional

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import target_name
from hfsweep.config.schema import SweepConfig


def written_study(sweep: SweepConfig) -> Optional[tuple[str, str]]:
    """The storage URL and study name the sweep writes; None when it writes none."""
    node = sweep.search_alg
    if target_name(node) != "OptunaSearch" or not node.get("storage"):
        return None
    return node["storage"], node.get("study_name") or "optuna"  # OptunaSearch's own default name


def storage_problem(url: str) -> Optional[str]:
    """Why Optuna cannot open `url` as a storage, in one line; None when it can."""
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    try:
        optuna.storages.get_storage(url)
    except (SQLAlchemyError, ImportError, ValueError) as error:
        return str(error).splitlines()[0]
    return None


def check_new_studies(cfgs: list[dict]) -> None:
    """Refuse, in one line, a study that exists already in its storage, or one that two jobs of a
    multirun would both write."""
    studies = [study for study in map(written_study, cfgs) if study]
    for i, (url, name) in enumerate(studies):
        if (url, name) in studies[:i]:
            raise ConfigError(
                f"search_alg.study_name: two jobs of this multirun would write the study '{name}' in {url}; "
                f"give each job its own search_alg.study_name."
            )
    if not studies:
        return
    import optuna

    for url, name in studies:
        problem = storage_problem(url)
        if problem:
            raise ConfigError(f"search_alg.storage: {url}: {problem}; give a URL such as sqlite:///sweep.db.")
        if name in optuna.get_all_study_names(url):
            raise ConfigError(
                f"search_alg.study_name: the study '{name}' already exists in {url}, an earlier sweep's; "
                f"choose another search_alg.study_name, delete it (optuna delete-study --storage {url} "
                f"--study-name {name}), or continue that sweep with python -m hfsweep.resume RUN_DIR."
            )


def study_exists(sweep: SweepConfig) -> bool:
    """Whether the sweep's stored study exists already (a resumed sweep's, which holds its
    points_to_evaluate from the first start)."""
    study = written_study(sweep)
    if study is None:
        return False
    import optuna

    url, name = study
    return name in optuna.get_all_study_names(url)


def close_lost_trials(sweep: SweepConfig) -> int:
    """Mark FAIL the study's trials still running once every trial of the sweep has ended, and say
    how many: a run killed between Optuna's ask and Tune's next save of its state leaves one, and
    the resumed sweep asks for that trial again."""
    study = written_study(sweep)
    if study is None:
        return 0
    import optuna

    url, name = study
    study = optuna.load_study(study_name=name, storage=url)
    lost = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    for trial in lost:
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
    return len(lost)
