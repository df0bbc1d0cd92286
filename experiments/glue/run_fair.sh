#!/usr/bin/env bash
# The fair test of #38 (experiments/glue/notebook/fair_test.md):
# per task, +experiment=glue_minilm_search (the defaults trial, search_space=finetune, TPE, ASHA in
# epochs, then the winner and the defaults re-trained over seeds 1-3), resumable: a task whose run
# directory exists is continued with python -m hfsweep.resume (finished trials and seeds are kept).
# Beside each run: every start's date, commit and data hashes (TASK.starts), the first start's hashes
# (TASK.sha256), and a start whose data differ from the first's is refused (provenance.sh).
#   GLUE_DIR=/data/glue OUT=/data/fair experiments/glue/run_fair.sh stsb rte mrpc cola
set -u
: "${GLUE_DIR:?set GLUE_DIR to the folder that holds the GLUE task folders (STS-B, RTE, ...)}" "${OUT:?set OUT to a folder for the runs}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
declare -A FOLDER=([stsb]=STS-B [rte]=RTE [mrpc]=MRPC [cola]=CoLA [sst2]=SST-2 [wnli]=WNLI)
# a report every epoch at batch 32 (four at batch 8): the training pairs / 32, so ASHA's first rung, one
# epoch, sees every trial's score; the preset's 180 is STS-B's
declare -A EVERY=([stsb]=180 [rte]=78 [mrpc]=115 [cola]=268 [wnli]=20)
source "$(dirname "$0")/provenance.sh"
mkdir -p "$OUT"
for task in "$@"; do  # every task's data checked before any runs
  record_start "$GLUE_DIR/${FOLDER[$task]}" "$OUT/$task"
done
for task in "$@"; do
  run="$OUT/$task"
  if [ -f "$run/resolved_config.yaml" ]; then
    echo "=== $(date +%T) $task: resuming $run"
    python -m hfsweep.resume "$run" >> "$OUT/$task.log" 2>&1
  else
    echo "=== $(date +%T) $task: starting $run"
    e=${EVERY[$task]}
    python -m hfsweep +experiment=glue_minilm_search glue="$task" hydra.run.dir="$run" \
      training.eval_steps="$e" training.save_steps="$e" training.logging_steps="$e" >> "$OUT/$task.log" 2>&1
  fi
  rc=$?  # before $(date) below, which would set $? to its own
  echo "=== $(date +%T) $task: exit $rc"
done
