"""One GPU check, prepared to fit one short run on one H100 or H200 (benchmarks/gpu.sh installs the
wheelhouse, then runs this). Each step runs in its own process under its own timeout, writes to
the one log, and ends with a `RESULT {json}` line; the summary at the end lists every step.

    sweep    the default sweep with cluster.use_gpu=true (RAY_LOG_TO_STDERR=1: a Ray that does not
             start says why)
    pytest   pytest -m gpu (QLoRA deselected, and said so, without bitsandbytes)
    gpt2     GPT-2 small built from config (n_embd 768, 12 layers, 12 heads), bf16, sequence 1024, at
             the largest batch a quick search finds to fit: one hfsweep trial against a plain
             transformers.Trainer on the same prepared data in this invocation (tokens/s between the
             first and last checkpoint, as benchmarks/throughput.py counts them; target ratio >= 0.97),
             and its MFU: tokens/s x (6N + 12 L H Q T) / peak, N the parameters, L layers, H heads,
             Q head size, T sequence length (PaLM, appendix B: the attention FLOPs 6N leaves out),
             against the device's dense bf16 peak (hfsweep.loops.cost: 989 TFLOP/s for H100 SXM and
             H200)
    packed   four trials at 0.25 GPU each, at once, against one trial alone: summed tokens/s
    fsdp     strategy=fsdp on one GPU, and whether it engaged: FSDP-wrapped modules and DTensor
             parameters seen by a callback in the worker (benchmarks/gpu_probe.py); where the
             one-worker trial does not engage it, the plain Trainer under torchrun (world size 1)
             shows what FSDP on one GPU looks like

`--cpu-smoke` runs every step on this CPU with the tiny model for a few steps (GPU-only parts are
skipped, saying so), to check the script before spending GPU time.

    python benchmarks/gpu.py --out DIR [--cpu-smoke] [--steps sweep,gpt2,...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
STEPS = ("env", "sweep", "gpt2", "fsdp", "packed", "pytest")
# seconds each step may take: what it took on an H200 (env 6-8, gpt2 125-204, sweep 61, packed 97, fsdp 95 with
# its hfsweep run cut at 66, pytest 104 before the FSDP test and about 210 with it; benchmarks/results/gpu/
# runs 4-9), with room. A step gets no more than what is left of --budget, and
# the steps after it say they were not run: all six need about 11 minutes, so split them over two calls
TIMEOUTS = {"env": 20, "sweep": 150, "gpt2": 260, "fsdp": 180, "packed": 200, "pytest": 240}
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline"}


def result(**values) -> None:
    print("RESULT " + json.dumps(values), flush=True)


def hfsweep_cmd(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "hfsweep", *overrides]


def run_logged(cmd: list[str], timeout: float, env: dict | None = None, cwd: str | None = None) -> int:
    """Run `cmd`, its output going to this step's output (the log); its exit status, 124 on timeout,
    when it and everything it started (a Ray it launched) are killed."""
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        print(f"timed out after {timeout:.0f} s", flush=True)
        return 124


# ---------------------------------------------------------------- steps (each in its own process)

def step_env(args) -> None:
    import torch

    run_logged(["nvidia-smi"], 20) if not args.cpu_smoke else None
    print(f"python {sys.version.split()[0]} at {sys.executable}; torch {torch.__version__}, cuda {torch.version.cuda}")
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    print("pip freeze (put it in benchmarks/gpu_target_packages.txt to pin the target's versions):", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "freeze"], timeout=20)
    result(ok=True, device=device, gpus=torch.cuda.device_count(), torch=torch.__version__)


def step_sweep(args) -> None:
    import torch

    gpus = torch.cuda.device_count()
    overrides = ["debug=tiny"] if args.cpu_smoke else ["cluster.use_gpu=true"]
    if gpus == 1:  # the default's 2 workers need a GPU each
        overrides.append("cluster.num_workers=1")
    with tempfile.TemporaryDirectory() as cwd:  # from outside the repository, as a user runs it
        started = time.time()
        rc = run_logged(hfsweep_cmd(*overrides), args.step_timeout - 10, env={"RAY_LOG_TO_STDERR": "1", **OFFLINE},
                        cwd=cwd)
        tables = list(Path(cwd).glob("outputs/*/*/results.csv"))
        if not tables:
            return result(ok=False, exit=rc, seconds=round(time.time() - started), overrides=" ".join(overrides))
        import pandas as pd

        table = pd.read_csv(tables[0])
        best = [c for c in table.columns if c.startswith("best")]
        result(ok=rc == 0, exit=rc, seconds=round(time.time() - started), overrides=" ".join(overrides),
               trials=len(table), ended=sorted(set(table["ended"])),
               **({best[0]: round(float(table[best[0]].min()), 4)} if best else {}),
               device=sorted(set(table["device"])) if "device" in table else None)


def step_pytest(args) -> None:
    import importlib.util

    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "tests/e2e/test_gpu.py", "-p", "no:cacheprovider", "-q", "-rs",
           "--durations=5"]
    note = ""
    if importlib.util.find_spec("bitsandbytes") is None:
        cmd += ["-k", "not qlora"]
        note = "QLoRA deselected: bitsandbytes is not installed"
    rc = run_logged(cmd, args.step_timeout - 10, env=OFFLINE, cwd=str(ROOT))
    result(ok=rc in (0, 5) if args.cpu_smoke else rc == 0, exit=rc, note=note)


def repeated_prose(folder: Path, copies: int) -> Path:
    """The embedded pydoc prose, its train file repeated `copies` times. Alone it is 88 blocks of 1024
    tokens, less than one batch of 96: in the H200's run 4 every step was a whole epoch (a new Ray
    Data read per step for hfsweep) and a batch of 96 held 88 rows, while tokens/s counted 96."""
    from hfsweep.data.sources import write_pydoc_topics

    write_pydoc_topics(str(folder))
    train = folder / "train.txt"
    train.write_text("\n".join([train.read_text()] * copies))
    return folder


def largest_batch(cfg: dict, candidates: list[int], device: str) -> tuple[int, dict]:
    """The largest batch of `candidates` whose bf16-autocast training step (forward, backward,
    AdamW) fits in 90% of the device's memory, by trying them from the largest down."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    model_cfg = dict(cfg["model"]["config"])
    block, tried = cfg["data"]["block_size"], {}
    config = AutoConfig.for_model(model_cfg.pop("model_type"), vocab_size=cfg["vocab_size"], **model_cfg)
    for batch in sorted(candidates, reverse=True):
        model = AutoModelForCausalLM.from_config(config).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        try:
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            for _ in range(2):
                ids = torch.randint(0, config.vocab_size, (batch, block), device=device)
                with torch.autocast(device, dtype=torch.bfloat16):
                    loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            if device == "cuda":
                share = torch.cuda.max_memory_allocated() / torch.cuda.get_device_properties(0).total_memory
                tried[batch] = round(share, 3)
                if share > 0.9:
                    raise torch.cuda.OutOfMemoryError("over 90% of the device")
            else:
                tried[batch] = "fits"
            return batch, tried
        except torch.cuda.OutOfMemoryError:
            tried.setdefault(batch, "out of memory")
        finally:
            del model, optimizer
            if device == "cuda":
                torch.cuda.empty_cache()
    raise SystemExit(f"no batch of {candidates} fits")


def step_gpt2(args) -> None:
    import torch
    from _common import config, plain_trainer_saves, run_sweep
    from throughput import tokens_per_second

    from hfsweep.config.schema import ClusterConfig, typed
    from hfsweep.data.tokenizers import load_tokenizer
    from hfsweep.driver.ray_cluster import init_ray
    from hfsweep.loops.cost import peak_flops

    gpu = not args.cpu_smoke
    device = "cuda" if gpu else "cpu"
    steps = 60 if gpu else 6
    batches = [8, 16, 24, 32, 48, 64, 96, 128] if gpu else [2, 4]
    model = ["model=gpt2", "data.block_size=1024"] if gpu else ["model=gpt2_tiny"]
    prose = repeated_prose(Path(tempfile.mkdtemp(prefix="gpt2-prose-")), copies=90 if gpu else 1)
    base = ["scheduler=fifo", "data.source=local", f"data.path={prose}",
            "search_space.training.learning_rate.values=[3e-4]", "search_alg.defaults_trial=false",
            "cluster.num_workers=1", f"cluster.use_gpu={str(gpu).lower()}", "training.bf16=true",
            f"training.max_steps={steps}", f"training.eval_steps={steps // 3}", f"training.save_steps={steps // 3}",
            f"training.logging_steps={steps // 3}", "training.warmup_steps=0", *model, *args.gpt2_overrides.split()]
    cfg = config(base, "/tmp/unused")
    # before this process tokenizes or touches CUDA: their threads break Ray's start
    init_ray(typed(ClusterConfig, cfg["cluster"]))
    # the data (and its tokenizer) once, as the sweep prepares it: the model's vocabulary is the tokenizer's
    from _common import prepare_data

    data = prepare_data(cfg)
    cfg["vocab_size"] = len(load_tokenizer(data.tokenizer_path))
    blocks = data.num_train_blocks
    batch, tried = largest_batch(cfg, batches, device)
    if blocks < steps * batch:
        raise SystemExit(f"{blocks} training blocks hold fewer than {steps} batches of {batch}: raise the copies")
    print(f"batch search (peak share of the device's memory): {tried}; using {batch}", flush=True)
    overrides = [*base, f"training.per_device_train_batch_size={batch}", f"training.per_device_eval_batch_size={batch}"]
    cfg = config(overrides, "/tmp/unused")
    saves = plain_trainer_saves(cfg, 1)
    plain = tokens_per_second([s for s, _ in saves], saves[-1][1] - saves[0][1], cfg, 1)
    _, results = run_sweep(overrides)
    history = results[0].metrics_dataframe
    ours = tokens_per_second(list(history["step"]), history["time_this_iter_s"].iloc[1:].sum(), cfg, 1)
    m = cfg["model"]["config"]
    params = int(history["trainable_params"].iloc[-1])
    layers, heads, head_size, seq = m["n_layer"], m["n_head"], m["n_embd"] // m["n_head"], cfg["data"]["block_size"]
    flops_per_token = 6 * params + 12 * layers * heads * head_size * seq
    peak = peak_flops(torch.cuda.get_device_name(0)) if gpu else None
    mfu = ours * flops_per_token / peak if peak else None
    print(f"N = {params:,} parameters; FLOPs per token = 6N + 12*L*H*Q*T = "
          f"6*{params:,} + 12*{layers}*{heads}*{head_size}*{seq} "
          f"= {flops_per_token:,}; peak {peak or 'unknown'} FLOP/s", flush=True)
    result(ok=True, overrides=args.gpt2_overrides or None, batch=batch, train_blocks=blocks, params=params,
           plain_tokens_per_s=round(plain),
           hfsweep_tokens_per_s=round(ours),
           ratio=round(ours / plain, 3), target_ratio=0.97, mfu=round(mfu, 3) if mfu else None,
           mfu_6n_only_reported=round(float(history["mfu"].iloc[-1]), 3) if "mfu" in history else None,
           peak_memory_mb=round(float(history["peak_memory_mb"].max())))


def step_packed(args) -> None:
    import pandas as pd

    gpu = not args.cpu_smoke
    steps = 200 if gpu else 8
    every = steps // 4 if gpu else steps // 2
    base = ["debug=tiny", "training.bf16=true", f"training.max_steps={steps}", f"training.eval_steps={every}",
            f"training.save_steps={every}", f"training.logging_steps={every}"]
    if gpu:
        base += ["cluster.use_gpu=true", "+cluster.resources_per_worker.GPU=0.25"]
    runs = {}
    for label, lrs, share in (("alone", "[1e-3]", 0.4), ("packed", "[3e-3,1e-3,3e-4,1e-4]", 0.55)):
        with tempfile.TemporaryDirectory() as cwd:
            rc = run_logged(hfsweep_cmd(*base, f"search_space.training.learning_rate.values={lrs}"),
                            args.step_timeout * share, env=OFFLINE, cwd=cwd)
            table = list(Path(cwd).glob("outputs/*/*/results.csv"))
            if rc or not table:
                return result(ok=False, exit=rc, failed=label)
            runs[label] = pd.read_csv(table[0])
    alone = float(runs["alone"]["train_tokens_per_second"].sum())
    packed = runs["packed"]["train_tokens_per_second"]
    result(ok=len(packed) == 4, alone_tokens_per_s=round(alone), packed_sum_tokens_per_s=round(float(packed.sum())),
           packed_each=[round(float(v)) for v in packed], gain=round(float(packed.sum()) / alone, 2))


def step_fsdp(args) -> None:
    if args.cpu_smoke:
        return result(ok=True, skipped="FSDP needs a GPU (hfsweep refuses strategy=fsdp on CPU, where transformers "
                                       "trains plain DDP)")
    import dataclasses

    from _common import config, prepare_data

    probe = Path(tempfile.mkdtemp()) / "probe.json"
    overrides = ["debug=tiny", "cluster.use_gpu=true", "strategy=fsdp", "training.bf16=true",
                 "+callbacks.probe._target_=gpu_probe.ShardedParams", f"+callbacks.probe.out={probe}"]
    with tempfile.TemporaryDirectory() as cwd:
        rc = run_logged(hfsweep_cmd(*overrides), args.step_timeout * 0.55,
                        env={**OFFLINE, "PYTHONPATH": f"{BENCH}:{os.environ.get('PYTHONPATH', '')}"}, cwd=cwd)
        reports = list(Path(cwd).glob("outputs/*/*/sweep/*/result.json"))
        distributed = sorted({json.loads(l).get("distributed")
                              for r in reports for l in r.read_text().splitlines() if l.strip()})  # noqa: E741
    seen = json.loads(probe.read_text()) if probe.exists() else None
    engaged = bool(seen and seen["dtensor_params"] and seen["fsdp_modules"])
    out = {"hfsweep_exit": rc, "hfsweep_distributed": distributed, "hfsweep_wrapping": seen, "engaged": engaged}
    if not engaged:  # what FSDP on one GPU looks like: a plain Trainer in a world of one process
        cfg = config(overrides[:4], "/tmp/unused")
        data = prepare_data(cfg)
        plain_probe = probe.with_name("plain.json")
        with tempfile.TemporaryDirectory() as out_dir:
            spec = Path(out_dir, "spec.json")
            spec.write_text(json.dumps({"cfg": cfg, "data": dataclasses.asdict(data), "output_dir": out_dir,
                                        "probe_out": str(plain_probe)}))
            prc = run_logged([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1",
                              str(BENCH / "_plain_trainer.py"), str(spec)],
                             args.step_timeout * 0.35, env={"PYTHONPATH": str(BENCH)})
        out["plain_torchrun_exit"] = prc
        out["plain_torchrun_wrapping"] = json.loads(plain_probe.read_text()) if plain_probe.exists() else None
    result(ok=engaged, **out)


# ---------------------------------------------------------------- the driver of the steps

RAY_LOGS = ("raylet.err", "raylet.out", "gcs_server.err", "gcs_server.out", "dashboard_agent.log")


def ray_log_tails(since: float, lines: int = 15) -> str:
    """The ends of the logs of the Ray sessions a failed step started (a Ray that did not start
    says why only there)."""
    sessions = [d for d in Path(tempfile.gettempdir(), "ray").glob("session_2*") if d.stat().st_mtime >= since - 5]
    out = []
    for session in sorted(sessions):
        for name in RAY_LOGS:
            log = session / "logs" / name
            if log.exists() and log.stat().st_size:
                tail = log.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"-- {log} (last {len(tail)} lines)\n" + "\n".join(tail))
    return "\n".join(out) or "(no Ray session logs from this step)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ROOT / "gpu-check")),
                        help="folder of the log (default $OUT)")
    parser.add_argument("--cpu-smoke", action="store_true", help="every step on this CPU, tiny and short")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"which of {','.join(STEPS)} (default: all)")
    parser.add_argument("--budget", type=float, default=420,
                        help="seconds for all the steps together (default 420: 8 minutes less the install)")
    parser.add_argument("--gpt2-overrides", default="",
                        help="more overrides for both arms of the gpt2 step, space-separated "
                             "(+training.torch_compile=true)")
    parser.add_argument("--step", help=argparse.SUPPRESS)  # one step, in its own process
    parser.add_argument("--step-timeout", type=float, default=60, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        globals()[f"step_{args.step}"](args)
        return 0
    chosen = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in STEPS]
    if unknown:
        print(f"gpu.py: error: --steps: no step {', '.join(unknown)}; choose from {','.join(STEPS)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    log_path = args.out / "gpu.log"
    summary = []
    with open(log_path, "a") as log:
        def say(text: str) -> None:
            print(text, flush=True)
            log.write(text + "\n")
            log.flush()

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT).stdout.strip() or "unknown"
        say(f"== gpu.py {'--cpu-smoke ' if args.cpu_smoke else ''}at {time.strftime('%Y-%m-%d %H:%M:%S')}, "
            f"commit {commit}")
        begun = time.time()
        for step in chosen:
            left = args.budget - (time.time() - begun)
            timeout = TIMEOUTS[step] * 5 if args.cpu_smoke else min(TIMEOUTS[step], left)
            if timeout < 15:
                summary.append((step, {"ok": False, "why": f"not run: {left:.0f} s of --budget left"}))
                say(f"\n== step {step}: not run, {left:.0f} s of the budget left")
                continue
            say(f"\n== step {step} (timeout {timeout:.0f} s)")
            started = time.time()
            cmd = [sys.executable, str(Path(__file__)), "--step", step, "--step-timeout", str(timeout),
                   "--gpt2-overrides", args.gpt2_overrides, *(["--cpu-smoke"] if args.cpu_smoke else [])]
            env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": f"{BENCH}:{os.environ.get('PYTHONPATH', '')}"}
            lines = []
            try:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                        cwd=str(ROOT), start_new_session=True)
                deadline = started + timeout
                import selectors

                sel = selectors.DefaultSelector()
                sel.register(proc.stdout, selectors.EVENT_READ)
                quiet_since = None
                while True:
                    if time.time() > deadline:
                        raise subprocess.TimeoutExpired(cmd, timeout)
                    if not sel.select(timeout=1):
                        # the step has ended: stop reading once its output is drained, even where
                        # a process it left behind (a Ray daemon) still holds the pipe open
                        if proc.poll() is not None:
                            quiet_since = quiet_since or time.time()
                            if time.time() - quiet_since > 3:
                                break
                        continue
                    line = proc.stdout.readline()
                    if not line:
                        break
                    lines.append(line)
                    log.write(line)
                    log.flush()
                rc = proc.wait()
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)  # the step and everything it started (its own Ray included)
                proc.wait()
                rc = 124
            found = [json.loads(l[len("RESULT "):]) for l in lines if l.startswith("RESULT ")]  # noqa: E741
            outcome = found[-1] if found else {"ok": False}
            if rc:
                outcome.update(ok=False, exit=rc, why="timed out" if rc == 124 else "failed: see its output above")
            outcome["seconds"] = round(time.time() - started)
            if not outcome["ok"]:
                say(ray_log_tails(since=started))
            summary.append((step, outcome))
            say(f"== step {step}: {'ok' if outcome['ok'] else 'FAILED'} {json.dumps(outcome)}")
        say("\n== summary")
        for step, outcome in summary:
            say(f"{step:7s} {'ok    ' if outcome['ok'] else 'FAILED'} "
                f"{json.dumps({k: v for k, v in outcome.items() if k != 'ok'})}")
        say(f"log: {log_path}")
    return 0 if all(outcome["ok"] for _, outcome in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
