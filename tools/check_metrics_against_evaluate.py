"""hfsweep's locally computed metrics against `evaluate`'s own module scripts, on random inputs.

    git clone https://github.com/huggingface/evaluate /tmp/evaluate
    python tools/check_metrics_against_evaluate.py /tmp/evaluate/metrics

Prints, per metric, the largest absolute difference over the values both report (evaluate casts
regression inputs to float32, hence ~1e-8 there; rouge's bootstrap is seeded on both sides)."""
import random
import sys

import evaluate
import numpy

from hfsweep.tasks.metrics import flatten, load_metric
MODULES = sys.argv[1]
rng = random.Random(0)
def cls(n, k): return [rng.randrange(k) for _ in range(n)]
cases = []
p, r = cls(200, 2), cls(200, 2)
for m in ["accuracy", "f1", "precision", "recall", "matthews_correlation"]:
    cases.append((m, None, p, r, {}))
p3, r3 = cls(200, 3), cls(200, 3)
cases.append(("f1", None, p3, r3, {"average": "macro"}))
x = [rng.random() for _ in range(100)]; y = [v + rng.random() for v in x]
cases += [("pearsonr", None, x, y, {}), ("spearmanr", None, x, y, {})]
for c in ["mrpc", "cola", "sst2", "qqp"]:
    cases.append(("glue", c, p, r, {}))
cases.append(("glue", "stsb", x, y, {}))
tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG"]
tr = [[rng.choice(tags) for _ in range(rng.randrange(3, 12))] for _ in range(80)]
tp = [[t if rng.random() < 0.7 else rng.choice(tags) for t in s] for s in tr]
cases.append(("seqeval", None, tp, tr, {}))
words = "the a cat dog sat on mat in Paris France tower river of big small".split()
def sent(): return " ".join(rng.choice(words) for _ in range(rng.randrange(1, 6)))
refs = [{"id": str(i), "answers": {"text": [sent() for _ in range(rng.randrange(1, 3))], "answer_start": [0]}} for i in range(100)]
preds = [{"id": str(i), "prediction_text": sent()} for i in range(100)]
cases.append(("squad", None, preds, refs, {}))
refs2 = [{"id": str(i), "answers": {"text": [sent()] if i % 3 else [], "answer_start": [0] if i % 3 else []}} for i in range(90)]
preds2 = [{"id": str(i), "prediction_text": sent() if i % 2 else "", "no_answer_probability": 0.0} for i in range(90)]
cases.append(("squad_v2", None, preds2, refs2, {}))
hyp = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(50)]
ref = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(50)]
cases += [("rouge", None, hyp, ref, {}), ("sacrebleu", None, hyp, ref, {})]
worst = 0
for name, config, pr, rf, kw in cases:
    ours = load_metric({"name": name, **({"config_name": config} if config else {}), **kw})(pr, rf, num_classes=3 if kw.get("average") == "macro" else 2)
    numpy.random.seed(0)
    theirs = flatten(name, evaluate.load(f"{MODULES}/{name}", config).compute(predictions=pr, references=rf, **kw))
    common = [k for k in ours if k in theirs]
    diff = max(abs(ours[k] - theirs[k]) for k in common)
    if diff > 1e-6: print({k: (ours[k], theirs[k]) for k in common if abs(ours[k]-theirs[k]) > 1e-6})
    worst = max(worst, diff)
    print(f"{name}{'/'+config if config else ''}: {len(common)} values, {len(set(theirs)-set(ours))} of evaluate's not reported, max |diff| {diff:.2e}  e.g. {common[0]}={ours[common[0]]:.6f}")
print("worst", worst)
