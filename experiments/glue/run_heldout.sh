#!/usr/bin/env bash
# #59 item 6: the fair test again, on data the search never saw (experiments/glue/README.md). Per
# task and search seed, +experiment=glue_minilm_search (all-MiniLM-L6-v2, run_glue.py's defaults
# as the defaults trial, search_space=finetune, TPE seeded by the search seed, ASHA in epochs) with
# 10% of GLUE's train split carved (seeded by data.split_seed, stratified) as the validation set the
# search, ASHA and checkpoints see, and GLUE's dev set as the test split. The search stops at 8 defaults
# runs in training samples (select.within_budget=false: the budget prices the search alone); then the
# winner and the defaults are re-trained over seeds 1-3 and their final models scored once on the
# test split. Each job is TASK:SEED, run in OUT/TASK/sSEED; a job whose run exists is resumed.
# Beside each task: every start's date, commit and data hashes (OUT/TASK.starts, provenance.sh).
#   GLUE_DIR=/data/glue OUT=/data/heldout experiments/glue/run_heldout.sh rte:1 mrpc:1 rte:2 ...
set -u
: "${GLUE_DIR:?set GLUE_DIR to the folder that holds the GLUE task folders (STS-B, RTE, MRPC)}" "${OUT:?set OUT to a folder for the runs}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
declare -A FOLDER=([stsb]=STS-B [rte]=RTE [mrpc]=MRPC)
# one defaults run: ceil(3 epochs x the carved train split / 8) steps x 8 samples, the carve holding
# ceil(10% of train) pairs (datasets' train_test_split): RTE 2490 -> 2241 trained on, 841 steps;
# MRPC 3668 -> 3301, 1238 steps; STS-B 5749 -> 5174, 1941 steps. The budget is 8 of them. The
# summary's samples line states the defaults trial's own count, which checks this arithmetic.
declare -A DEFAULTS_RUN=([rte]=6728 [mrpc]=9904 [stsb]=15528)
# a report every epoch of the carved train split at batch 32 (four at batch 8), so ASHA's first
# rung, one epoch, sees every trial's score
declare -A EVERY=([rte]=70 [mrpc]=103 [stsb]=162)
source "$(dirname "$0")/provenance.sh"
for job in "$@"; do  # every job, then every job's data, checked before any runs
  task=${job%%:*}
  [ -n "${FOLDER[$task]:-}" ] && [[ ${job#*:} =~ ^[0-9]+$ ]] || { echo "run_heldout.sh: '$job' is not TASK:SEED (TASK: rte, mrpc or stsb)" >&2; exit 2; }
done
mkdir -p "$OUT"
declare -A RECORDED=()
for job in "$@"; do  # once per task, however many of its search seeds this start runs
  task=${job%%:*}
  [ -n "${RECORDED[$task]:-}" ] && continue
  RECORDED[$task]=1
  record_start "$GLUE_DIR/${FOLDER[$task]}" "$OUT/$task"
done
for job in "$@"; do
  task=${job%%:*} seed=${job#*:}
  run="$OUT/$task/s$seed"
  if [ -f "$run/resolved_config.yaml" ]; then
    echo "=== $(date +%T) $job: resuming $run"
    python -m hfsweep.resume "$run" >> "$run.log" 2>&1
  else
    echo "=== $(date +%T) $job: starting $run"
    e=${EVERY[$task]}
    mkdir -p "$OUT/$task"
    python -m hfsweep +experiment=glue_minilm_search glue="$task" hydra.run.dir="$run" search_alg.seed="$seed" \
      data.validation_split_percentage=10 data.test_split=validation \
      budget.train_samples=$((8 * DEFAULTS_RUN[$task])) select.within_budget=false num_samples=20 \
      training.eval_steps="$e" training.save_steps="$e" training.logging_steps="$e" >> "$run.log" 2>&1
  fi
  rc=$?  # before $(date) below, which would set $? to its own
  echo "=== $(date +%T) $job: exit $rc"
done
