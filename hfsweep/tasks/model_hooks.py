"""A task family's model concern: the transformers Auto class that builds its models, what their
config takes from the processor and the data, and the loss's name. `hfsweep.models` calls these
hooks (`hfsweep.contract.protocols.ModelTask`)."""

from __future__ import annotations

from typing import Optional


class ModelHooks:
    """How a family's models are built: `auto_model_class` has no default."""

    # transformers' name for the loss (`LOSS_MAPPING`), set on models whose class name does not
    # give it away (GPT2LMHeadModel): without it the Trainer counts a causal LM's tokens before the
    # shift and reports every loss (1 - 1/block_size) too low.
    loss_type: Optional[str] = None

    def auto_model_class(self):
        """The transformers Auto class that builds and loads this family's models."""
        raise NotImplementedError

    def config_from_processor(self, processor) -> dict:
        """What a model built from `model.config` takes from the processor: a text model's
        vocabulary size and special tokens."""
        return {
            "vocab_size": len(processor),
            "bos_token_id": processor.bos_token_id,
            "eos_token_id": processor.eos_token_id,
            "pad_token_id": processor.pad_token_id,
        }

    def model_config_kwargs(self, label_names: Optional[list]) -> dict:
        """What the model's config needs from the data: by default the classes' names, if any."""
        if not label_names:
            return {}
        return {"id2label": dict(enumerate(label_names)), "label2id": {name: i for i, name in enumerate(label_names)}}
