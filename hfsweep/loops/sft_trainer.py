"""`trainer=sft`: TRL's `SFTTrainer` as the trial's Trainer, on the rows `model.task=sft` prepared.

A module of its own because it imports TRL, which only SFT sweeps need (`hfsweep[sft]`).
"""

from __future__ import annotations

import datasets
from trl import SFTConfig, SFTTrainer


class RayDataSFTTrainer(SFTTrainer):
    """`SFTTrainer` training on a worker's Ray Data shard of already prepared rows.

    TRL refuses a train_dataset that is not a `datasets` Dataset or IterableDataset, and reads its
    first example to tell text from vision data. A worker's shard is a Ray Data iterable, which must
    not be read ahead (the workers read each epoch of the split together), so TRL is shown one empty
    row of token ids, and the shard replaces it once TRL's checks are done
    (`prepare_trainer` then streams it). The rows are TRL's own preparation, done once per sweep
    (hfsweep.tasks.sft), so TRL's per-trainer preparation is skipped.
    """

    arguments_class = SFTConfig  # what `training_arguments` builds for this Trainer

    def __init__(self, *, args: SFTConfig, train_dataset, **kwargs):
        args.dataset_kwargs = {**(args.dataset_kwargs or {}), "skip_prepare_dataset": True}
        stand_in = datasets.Dataset.from_dict({"input_ids": [[]]})
        super().__init__(args=args, train_dataset=stand_in, **kwargs)
        self.train_dataset = train_dataset
