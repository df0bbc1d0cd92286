#!/usr/bin/env bash
# #58's RTE case, re-run: in the RTE search methods' runs PBT paused the defaults trial and restored it
# from checkpoint-624 (two passes of RTE at batch 8), and from step 702 its losses left those of the
# uninterrupted run of the same configuration and seed. Here the fair test's defaults (lr 5e-5, batch
# 8, 3 epochs, no warm-up, no weight decay, grouped by length, seed 42, a report every 78 steps) run
# twice: uninterrupted, and crashed once checkpoint-624 is saved (tests/faults.py's CrashAfterSave),
# so Tune restores the trial from it. Each run's per-step losses land in OUT/rte_restore/*.csv.
#   GLUE_DIR=/data/glue OUT=/data/runs experiments/glue/rte_restore.sh
set -u
: "${GLUE_DIR:?set GLUE_DIR to the folder that holds the GLUE task folders (RTE, ...)}" "${OUT:?set OUT to a folder for the runs}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
RUNS="$OUT/rte_restore"
mkdir -p "$RUNS"
source "$(dirname "$0")/provenance.sh"
record_start "$GLUE_DIR/RTE" "$RUNS/rte"
DEFAULTS=(+experiment=glue_minilm_search glue=rte training.eval_steps=78 training.save_steps=78
          training.logging_steps=78 '~search_space.training.learning_rate'
          '~search_space.training.per_device_train_batch_size' '~search_space.training.num_train_epochs'
          '~search_space.training.weight_decay' 'search_space.training.warmup_steps={sampler:grid,values:[0.0]}'
          search_alg=grid search_alg.defaults_trial=false scheduler=fifo '~scheduler.grace_period'
          select.top_k=0 num_samples=1)
CRASH=(cluster.max_failures=1 +callbacks.crash._target_=tests.faults.CrashAfterSave +callbacks.crash.step=624)
cd "$(dirname "$0")/../.."  # tests.faults is imported from the checkout
for arm in uninterrupted restored; do
  run="$RUNS/$arm"
  extra=()
  [ "$arm" = restored ] && extra=("${CRASH[@]}")
  echo "=== $(date +%T) $arm: starting $run"
  python -m hfsweep "${DEFAULTS[@]}" "${extra[@]}" hydra.run.dir="$run" name="$arm" >> "$run.log" 2>&1
  rc=$?
  echo "=== $(date +%T) $arm: exit $rc"
  python - "$run" "$RUNS/$arm.csv" <<'PY'
import glob, json, sys
import pandas as pd
(results,) = glob.glob(f"{sys.argv[1]}/*/run_trial_*/result.json")  # every key (progress.csv keeps its first header)
history = pd.DataFrame([json.loads(line) for line in open(results) if line.strip()])
columns = [c for c in ("step", "loss", "eval_loss", "eval_accuracy", "resumed_from") if c in history]
history[columns].to_csv(sys.argv[2], index=False)
PY
done
