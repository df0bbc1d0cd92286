"""Writes tests/fixtures/evaluate_reference.json: fixed inputs and the values `evaluate`'s own
metric modules give for them, which tests/unit/test_metrics.py compares hfsweep's offline metrics with.

    git clone https://github.com/huggingface/evaluate /tmp/evaluate
    python tools/make_evaluate_reference.py /tmp/evaluate/metrics

The inputs come from a seeded generator, so a rerun with the same evaluate gives the same file.
Values are evaluate's results as hfsweep names them (`flatten`: nested keys joined with `_`, lists
dropped, `score` renamed); numpy is seeded before each call, as hfsweep seeds rouge's bootstrap."""

import json
import random
import subprocess
import sys
from pathlib import Path

import evaluate
import numpy

from hfsweep.tasks.metrics import flatten

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "evaluate_reference.json"


def cases(rng: random.Random) -> list[dict]:
    """(hfsweep entry, evaluate module, config and arguments, inputs) for every metric hfsweep computes offline."""

    def case(case_id, entry, module, predictions, references, config=None, kwargs=None, num_classes=None):
        return {
            "id": case_id,
            "entry": entry,
            "num_classes": num_classes,
            "evaluate": {"module": module, "config_name": config, "kwargs": kwargs or {}},
            "predictions": predictions,
            "references": references,
        }

    def labels(n, k):
        return [rng.randrange(k) for _ in range(n)]

    found = []
    p, r = labels(200, 2), labels(200, 2)
    for name in ["accuracy", "f1", "precision", "recall", "matthews_correlation"]:
        found.append(case(name, name, name, p, r, num_classes=2))
    found.append(
        case(
            "f1_macro",
            {"name": "f1", "average": "macro"},
            "f1",
            labels(200, 3),
            labels(200, 3),
            kwargs={"average": "macro"},
            num_classes=3,
        )
    )
    x = [rng.random() for _ in range(100)]
    y = [v + rng.random() for v in x]
    found += [case("pearsonr", "pearsonr", "pearsonr", x, y), case("spearmanr", "spearmanr", "spearmanr", x, y)]
    for config in ["mrpc", "cola", "sst2", "qqp"]:
        found.append(
            case(f"glue_{config}", {"name": "glue", "config_name": config}, "glue", p, r, config=config, num_classes=2)
        )
    found.append(case("glue_stsb", {"name": "glue", "config_name": "stsb"}, "glue", x, y, config="stsb"))
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG"]
    gold = [[rng.choice(tags) for _ in range(rng.randrange(3, 12))] for _ in range(80)]
    tagged = [[t if rng.random() < 0.7 else rng.choice(tags) for t in sentence] for sentence in gold]
    # evaluate always reports per entity
    found.append(case("seqeval", {"name": "seqeval", "per_entity": True}, "seqeval", tagged, gold))
    words = "the a cat dog sat on mat in Paris France tower river of big small".split()

    def sentence():
        return " ".join(rng.choice(words) for _ in range(rng.randrange(1, 6)))

    refs = [
        {"id": str(i), "answers": {"text": [sentence() for _ in range(rng.randrange(1, 3))], "answer_start": [0]}}
        for i in range(100)
    ]
    preds = [{"id": str(i), "prediction_text": sentence()} for i in range(100)]
    found.append(case("squad", "squad", "squad", preds, refs))
    refs = [
        {"id": str(i), "answers": {"text": [sentence()] if i % 3 else [], "answer_start": [0] if i % 3 else []}}
        for i in range(90)
    ]
    preds = [
        {"id": str(i), "prediction_text": sentence() if i % 2 else "", "no_answer_probability": 0.0} for i in range(90)
    ]
    found.append(case("squad_v2", "squad_v2", "squad_v2", preds, refs))
    hypotheses = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(50)]
    references = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(50)]
    found += [
        case("rouge", "rouge", "rouge", hypotheses, references),
        case("sacrebleu", "sacrebleu", "sacrebleu", hypotheses, references),
    ]
    return found


def main(modules: str) -> None:
    commit = (
        subprocess.run(["git", "-C", modules, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        or "unknown"
    )
    written = []
    for found in cases(random.Random(0)):
        spec = found["evaluate"]
        numpy.random.seed(0)
        module = evaluate.load(f"{modules}/{spec['module']}", spec["config_name"])
        result = module.compute(predictions=found["predictions"], references=found["references"], **spec["kwargs"])
        written.append({**found, "values": flatten(spec["module"], result)})
    about = (
        f"Made by tools/make_evaluate_reference.py (rerun it to regenerate) with evaluate {evaluate.__version__} "
        f"and the metric modules of huggingface/evaluate at commit {commit}: evaluate's results on these inputs, "
        "flattened as hfsweep names them."
    )
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(
        '{"about": ' + json.dumps(about) + ',\n "cases": [\n' + ",\n".join(json.dumps(c) for c in written) + "\n]}\n"
    )
    print(f"wrote {len(written)} cases to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
