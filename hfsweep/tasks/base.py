"""What a task family owns, one concern per base class: its data (`data_hooks`: columns,
processor, preprocessing, collator), its model (`model_hooks`: Auto class, config, loss) and its
metrics (`metric_hooks`). `Task` joins them with what crosses them: its name and options, and the
checks of a config before Ray starts. Built-in tasks subclass `Task`, one module each."""

from __future__ import annotations

from hfsweep.config.schema import SweepConfig
from hfsweep.contract.protocols import IGNORED, EvalContext  # noqa: F401  (what task modules share with the loops)
from hfsweep.tasks.data_hooks import DataHooks, batch_collator, quiet_progress, rows  # noqa: F401  (the same)
from hfsweep.tasks.metric_hooks import MetricHooks
from hfsweep.tasks.model_hooks import ModelHooks


class Task(DataHooks, ModelHooks, MetricHooks):
    name: str = ""  # also part of the prepared data's cache key: give a user task a name of its own
    # Its options (dataclass fields, `task_options.*`) applied on the workers, not in the prepared
    # data: searching them prepares nothing anew (masked LM's masking share).
    worker_options: tuple[str, ...] = ()

    def identity(self) -> list:
        """What names this task in the prepared data's cache key: its name, and the options the
        prepared data depends on (the attributes a task keeps: its dataclass fields, `task_options`,
        or a user task's arguments; not `worker_options`, nor methods set on the instance)."""
        return [
            self.name,
            {
                key: value
                for key, value in sorted(vars(self).items())
                if not callable(value) and key not in self.worker_options
            },
        ]

    def options(self) -> dict:
        """Its options and their values: the fields of a Task dataclass (`task_options`)."""
        from dataclasses import fields, is_dataclass

        return {f.name: getattr(self, f.name) for f in fields(self)} if is_dataclass(self) else {}

    def check(self, sweep: SweepConfig) -> None:
        """Everything this family decides about a config, before Ray starts (the preflight calls it
        once): its data settings (`check_config`), the validation split kept whole where its
        metrics match rows in order, no stream where it reads the whole split first, examples that
        fit the model's positions, sweep metrics its evaluation reports, and its options' fit with them
        (`check_metrics`)."""
        from hfsweep.config.errors import ConfigError
        from hfsweep.tasks.metrics import check_objective_metric

        data = sweep.data
        self.check_config(data)
        self.check_searched_options(sweep.search_space.get("task_options") or {}, sweep)
        if self.needs_whole_validation and "validation" in data.datasets_to_split:
            raise ConfigError(
                f"data.datasets_to_split: model.task={self.name} matches its predictions to the validation split's "
                f"rows in order, which sharding the split would lose; use data.datasets_to_split=[train]."
            )
        if data.streaming and type(self).prepare_raw is not DataHooks.prepare_raw:
            raise ConfigError(
                f"data.streaming: the {self.name or type(self).__name__} task reads the whole train split before "
                f"tokenizing (e.g. to list its labels); set data.streaming=false (data.max_train_samples bounds "
                f"what is read)."
            )
        model_config = sweep.model.config
        positions = model_config.get("n_positions") or model_config.get("max_position_embeddings")
        length = getattr(data, self.length_key)
        if positions and length > positions:
            raise ConfigError(
                f"data.{self.length_key} ({length}): larger than the model's {positions} positions; "
                f"lower it (data.{self.length_key}={positions}) or raise the model's positions."
            )
        from hfsweep.config.objectives import objectives_of

        for metric, _ in objectives_of(sweep.metric, sweep.mode):
            check_objective_metric(sweep, self, metric)
        self.check_metrics(sweep)

    def check_searched_options(self, searched: dict, sweep: SweepConfig) -> None:
        """Every value a search may give an option (`search_space.task_options.*`: a grid's or
        choice's values, a range's bounds) checked as the same value set on the command line is:
        its type by the dataclass field's annotation (`with_options`), its range by `check_config`,
        its fit with the sweep's metrics by `check_metrics`."""
        from hfsweep.config.errors import ConfigError
        from hfsweep.config.loading import iter_leaves
        from hfsweep.tasks import with_options

        for key, spec in iter_leaves(searched):
            chosen = spec.get("sampler") in ("grid", "choice")
            values = (spec.get("values") or ()) if chosen else [spec[b] for b in ("low", "high") if b in spec]
            for value in values:
                try:
                    task = with_options(self, {key: value})
                    task.check_config(sweep.data)
                    task.check_metrics(sweep)
                except ConfigError as err:
                    reason = str(err).removeprefix(f"task_options.{key}: ").split("; ")[0]
                    raise ConfigError(
                        f"search_space.task_options.{key}: {value!r} is not a value "
                        f"task_options.{key} takes ({reason}); search only values it takes, or drop the key."
                    ) from err
