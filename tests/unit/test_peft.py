"""PEFT without a sweep: the adapter config from the `peft` group, which parts train per task,
what a digest covers, and which searched keys PBT leaves unperturbed."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from hfsweep.config.schema import ModelConfig, PeftConfig, typed
from hfsweep.driver.search.search_space import compile_search_space, pbt_mutations, unperturbed
from hfsweep.models import build_model, tensors_digest, weights_digest
from hfsweep.tasks import get_task
from tests.conftest import resolved_config
from tests.unit.test_trainer import OneToken


@pytest.mark.parametrize(
    "variant, use_dora, use_rslora", [("lora", False, False), ("dora", True, False), ("rslora", False, True)]
)
def test_each_peft_option_builds_its_lora_variant(tmp_path, variant, use_dora, use_rslora):
    cfg = resolved_config([f"peft={variant}", "peft.r=4", "peft.lora_alpha=8"], tmp_path, tmp_path)
    model = build_model(
        typed(ModelConfig, cfg["model"]),
        OneToken(),
        peft_cfg=typed(PeftConfig, cfg["peft"]),
        task=get_task(cfg["model"]["task"]),
    )
    config = model.peft_config["default"]
    assert (config.r, config.lora_alpha, config.use_dora, config.use_rslora) == (4, 8, use_dora, use_rslora)
    assert config.task_type == "CAUSAL_LM"
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    assert any("lora_magnitude_vector" in name for name in trainable) == use_dora


@pytest.mark.parametrize(
    "model, task, head",
    [
        ("bert_tiny", "sequence_classification", "classifier"),
        ("roberta_tiny", "sequence_classification", "classifier"),
        ("bert_tiny", "token_classification", "classifier"),
        ("bert_tiny", "question_answering", "qa_outputs"),
        ("bert_tiny", "multiple_choice", "classifier"),  # no PEFT task type: the head is named to train
        ("vit_tiny", "image_classification", "classifier"),
    ],
)
def test_a_task_head_trains_in_full_beside_the_adapter(tmp_path, model, task, head):
    targets = ["peft.target_modules=[q_proj,v_proj]"] if model == "vit_tiny" else []  # PEFT has no ViT default
    cfg = resolved_config([f"model={model}", f"model.task={task}", "peft=lora", *targets], tmp_path, tmp_path)
    labels = None if task == "question_answering" else ["negative", "positive"]
    peft_model = build_model(
        typed(ModelConfig, cfg["model"]),
        OneToken(),
        labels,
        typed(PeftConfig, cfg["peft"]),
        task=get_task(cfg["model"]["task"]),
    )
    trainable = {name for name, p in peft_model.named_parameters() if p.requires_grad}
    assert any(f"{head}.modules_to_save" in name for name in trainable), sorted(trainable)
    assert all("lora_" in name or f"{head}." in name for name in trainable)


def test_a_seq2seq_model_trains_only_its_adapter(tmp_path):
    cfg = resolved_config(["model=t5_tiny", "peft=lora"], tmp_path, tmp_path)
    model = build_model(
        typed(ModelConfig, cfg["model"]),
        OneToken(),
        peft_cfg=typed(PeftConfig, cfg["peft"]),
        task=get_task(cfg["model"]["task"]),
    )
    assert model.peft_config["default"].task_type == "SEQ_2_SEQ_LM"
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)


def test_a_peft_models_digest_is_its_saved_adapters(tmp_path):
    cfg = resolved_config(["peft=lora"], tmp_path, tmp_path)
    model = build_model(
        typed(ModelConfig, cfg["model"]),
        OneToken(),
        peft_cfg=typed(PeftConfig, cfg["peft"]),
        task=get_task(cfg["model"]["task"]),
    )
    model.save_pretrained(tmp_path / "adapter")
    saved = load_file(tmp_path / "adapter" / "adapter_model.safetensors")
    assert weights_digest(model) == tensors_digest(saved)
    assert not any("lora_" not in name for name in saved)


def test_pbt_leaves_a_leaf_marked_perturb_false_out_of_its_mutations(tmp_path):
    cfg = resolved_config(
        [
            "peft=lora",
            "+search_space.peft.r={sampler:choice,values:[4,8],perturb:false}",
            "+search_space.peft.lora_alpha={sampler:choice,values:[8,16]}",
        ],
        tmp_path,
        tmp_path,
    )
    space = compile_search_space(cfg["search_space"], cfg)
    assert unperturbed(cfg["search_space"]) == {"peft.r"}
    mutations = pbt_mutations(space, unperturbed(cfg["search_space"]))
    assert set(mutations["peft"]) == {"lora_alpha"}
    assert "learning_rate" in mutations["training"]
    assert "r" in space["peft"]  # still sampled per trial


def test_ia3_wraps_the_tiny_gpt2_and_its_checkpoint_holds_only_ia3_vectors(tmp_path):
    cfg = resolved_config(["peft=ia3"], tmp_path, tmp_path)
    model = build_model(
        typed(ModelConfig, cfg["model"]),
        OneToken(),
        peft_cfg=typed(PeftConfig, cfg["peft"]),
        task=get_task(cfg["model"]["task"]),
    )
    config = model.peft_config["default"]
    assert config.peft_type == "IA3" and config.task_type == "CAUSAL_LM"
    assert set(config.target_modules) == {"c_attn", "mlp.c_proj"} and set(config.feedforward_modules) == {
        "mlp.c_proj"
    }  # PEFT's GPT-2 default
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".ia3_l." in name for name in trainable)
    model.save_pretrained(tmp_path / "adapter")
    saved = load_file(tmp_path / "adapter" / "adapter_model.safetensors")
    assert len(saved) == 2 * cfg["model"]["config"]["n_layer"] and all(".ia3_l" in name for name in saved), sorted(
        saved
    )
    assert weights_digest(model) == tensors_digest(saved)


def test_ia3_is_accepted_and_a_searched_lora_only_key_with_it_is_refused_in_one_line(tmp_path):
    from hfsweep.config.errors import ConfigError
    from hfsweep.driver.preflight import preflight

    preflight(
        resolved_config(
            [
                "debug=tiny",
                "peft=ia3",
                "+search_space.peft.target_modules={sampler:choice,values:[[c_attn],[c_attn,c_fc]]}",
            ],
            tmp_path,
            tmp_path,
        )
    )
    with pytest.raises(
        ConfigError, match=r"^search_space\.peft\.r: peft=ia3 has no r; drop the key, or use an adapter that has it\.$"
    ):
        preflight(
            resolved_config(
                ["debug=tiny", "peft=ia3", "+search_space.peft.r={sampler:choice,values:[4,8]}"], tmp_path, tmp_path
            )
        )


def test_an_adapter_checkpoint_of_a_three_class_head_is_scored_on_a_test_split(tmp_path):
    """A LoRA trial's checkpoint holds the adapter and its head, not the base: scoring it rebuilds
    the base the trial built (with the task's three classes) before loading the adapter. Loaded as
    a plain model, the base came back with a two-way head, which the saved head does not fit."""
    import datasets
    from transformers import set_seed

    from hfsweep.data.tokenizers import TOKENIZER_TRAINERS
    from hfsweep.driver.results.evaluation import evaluate_checkpoint
    from tests.conftest import sweep_config

    sweep = sweep_config(["model=bert_tiny", "peft=lora", "eval_metrics=[accuracy]"], tmp_path / "run", tmp_path)
    texts = [f"sentence {i} is {'red' if i % 3 == 0 else 'green' if i % 3 == 1 else 'blue'}" for i in range(30)]
    tokenizer = TOKENIZER_TRAINERS["wordpiece"](texts, 60)
    set_seed(sweep.seed)
    names = ["red", "green", "blue"]
    model = build_model(sweep.model, tokenizer, names, sweep.peft, task=get_task(sweep.model.task))
    checkpoint = tmp_path / "checkpoint"
    model.save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=names)})
    rows = datasets.Dataset.from_dict({"text": texts, "label": [i % 3 for i in range(30)]}, features=features)
    raw = datasets.DatasetDict(train=rows, test=rows)
    scores = evaluate_checkpoint(sweep, str(checkpoint), sweep.data, raw, split="test")
    assert {"test_loss", "test_accuracy"} <= set(scores), sorted(scores)
