"""Model factories: a pretrained model by name or directory, or one built offline from
`model.config` with the tokenizer's vocabulary, through the task's Auto class."""

from __future__ import annotations

import hashlib

from hfsweep.config.errors import HubUnreachableError
from hfsweep.tasks import get_task


def check_pretrained_reachable(model_cfg: dict) -> None:
    """Fail on the driver, in one line, if a pretrained model's config cannot be loaded."""
    if not model_cfg["pretrained"]:
        return
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(model_cfg["pretrained"])
    except OSError as err:
        raise HubUnreachableError(
            f"model.pretrained: cannot load '{model_cfg['pretrained']}' ({type(err).__name__}: offline or not "
            f"found); use a local directory, or model.pretrained=null to train the model.config architecture from scratch."
        ) from err


def build_model(model_cfg: dict, tokenizer, label_names: list[str] | None = None):
    """A pretrained model, or one built from `model.config` with the tokenizer's vocabulary,
    through the task's Auto class; or whatever `model.factory` (a `_target_` callable taking
    `model_cfg`, `tokenizer` and `label_names`) returns, for architectures the Auto classes do not
    cover. A classifier gets one output per class of the prepared data, named after it."""
    task = get_task(model_cfg["task"])
    if model_cfg.get("factory"):
        from hydra.utils import instantiate

        factory = instantiate(model_cfg["factory"], _partial_=True)  # called here: Hydra would instantiate model_cfg too
        model = factory(model_cfg=model_cfg, tokenizer=tokenizer, label_names=label_names)
    else:
        model = _build(model_cfg, task.auto_model_class(), tokenizer, task.model_config_kwargs(label_names))
    if getattr(model, "loss_type", None) is None:
        model.loss_type = task.loss_type
    return model


def _build(model_cfg: dict, auto_class, tokenizer, from_data: dict):
    from transformers import AutoConfig

    if model_cfg["pretrained"]:
        return auto_class.from_pretrained(model_cfg["pretrained"], **from_data)
    arch = dict(model_cfg["config"])
    config = AutoConfig.for_model(
        arch.pop("model_type"),
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **arch,
        **from_data,
    )
    return auto_class.from_config(config)


def weights_digest(model) -> str:
    """A hash of every parameter and buffer, to check that two models hold the same weights."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()
