"""Benchmark 9: full fine-tuning against LoRA, the same base model and steps, in one invocation.

The base is a GPT-2 of `--width` and `--layers` on the embedded default's data and tokenizer,
saved once as a local directory that both sweeps load (`model.pretrained`). For each method:

- checkpoint bytes per report: the size of each checkpoint directory the trial wrote (weights or
  adapter, optimizer state, RNG, scheduler, tokenizer), median over the reports;
- tokens/s: training tokens per second of wall time between two reports (evaluation and the
  save included, as a sweep pays them), median over the reports after the first;
- restore time of a PBT exploit: `startup_s` of the first report after an exploit, the time from
  the restored trial's first line to its first optimizer step (loading the base, then the
  donor's checkpoint), in a 2-trial PBT sweep with one exploit at the first checkpoint.

    python benchmarks/peft_vs_full.py [--width 256 --layers 4 --steps 40]

(Not `benchmarks/peft.py`: run as a script, that name would shadow the `peft` package.)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from _common import config, run_sweep

from hfsweep.config.schema import ClusterConfig, ModelConfig, typed
from hfsweep.driver.ray_cluster import init_ray
from hfsweep.driver.results.best import directory_bytes
from hfsweep.tasks import get_task

METHODS = {"full fine-tuning": ["peft=none"], "LoRA (r=8, c_attn)": ["peft=lora"]}


def save_base(width: int, layers: int) -> str:
    """A GPT-2 of the given size with the embedded default's tokenizer, as a local directory."""
    import transformers
    from _common import prepare_data

    from hfsweep.data.tokenizers import load_tokenizer
    from hfsweep.models import build_model

    cfg = config([f"model.config.n_embd={width}", f"model.config.n_layer={layers}"], tempfile.mkdtemp())
    tokenizer = load_tokenizer(prepare_data(cfg).tokenizer_path)
    transformers.set_seed(0)
    folder = tempfile.mkdtemp(prefix="hfsweep-peft-base-")
    model_cfg = typed(ModelConfig, cfg["model"])
    build_model(model_cfg, tokenizer, task=get_task(model_cfg.task)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def measure(base: str, method: list[str], steps: int) -> dict:
    common = [*method, f"model.pretrained={base}", f"model.tokenizer.pretrained={base}", "cluster.num_workers=1",
              "training.eval_steps=10", "training.save_steps=10", "training.logging_steps=10"]
    _, results = run_sweep([*common, "scheduler=fifo", f"training.max_steps={steps}",
                            "search_space.training.learning_rate.values=[1e-3]"])
    history = results[0].metrics_dataframe
    tokens_per_report = 10 * 8 * 128  # steps between reports x per_device_train_batch_size x block_size
    _, pbt = run_sweep([*common, "scheduler=pbt", "scheduler.quantile_fraction=0.5",
                        "scheduler.resample_probability=0.0", "+scheduler.synch=true",
                        "search_space=learning_rate_loguniform", "num_samples=2", "training.max_steps=20",
                        "training.lr_scheduler_type=constant"])
    rows = [row for result in pbt for _, row in result.metrics_dataframe.iterrows()]
    restored = [row["startup_s"] for row in rows if isinstance(row.get("resumed_from"), str)]
    fresh = [row["startup_s"] for row in rows if row["step"] == 10 and not isinstance(row.get("resumed_from"), str)]
    return {
        "checkpoint_bytes": statistics.median(directory_bytes(p) for p in history["checkpoint_path"]),
        "tokens_per_s": statistics.median(tokens_per_report / t for t in history["time_this_iter_s"].iloc[1:]),
        "restore_s": statistics.median(restored) if restored else float("nan"),
        "fresh_start_s": statistics.median(fresh),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    init_ray(typed(ClusterConfig, {"num_cpus": 8}))
    base = save_base(args.width, args.layers)
    figures = {name: measure(base, method, args.steps) for name, method in METHODS.items()}
    full = figures["full fine-tuning"]
    print(f"\nGPT-2 {args.layers} layers x {args.width}, {args.steps} steps, 1 worker per trial")
    print("| method | checkpoint bytes per report | share of full | tokens/s | PBT exploit: start to first step "
          "| fresh trial: start to first step |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, f in figures.items():
        print(f"| {name} | {f['checkpoint_bytes'] / 2**20:.2f} MiB "
              f"| {f['checkpoint_bytes'] / full['checkpoint_bytes']:.1%} | "
              f"{f['tokens_per_s']:.0f} | {f['restore_s']:.2f} s | {f['fresh_start_s']:.2f} s |")


if __name__ == "__main__":
    main()
