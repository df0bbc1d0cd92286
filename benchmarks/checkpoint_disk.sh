#!/usr/bin/env bash
# What a sweep leaves on disk (#58's done-when): a 3-point learning-rate grid of
# +experiment=bert_mrpc model=minilm_l6 on GLUE's MRPC files, 600 steps of 16, one worker a trial (what
# a trial saves does not depend on its workers, and on a 2-core machine a two-worker trial runs at its
# slower worker's pace), run by the
# checkout in BASE (a commit before the checkpoint budget's default) and by this one, one after
# the other on the same machine. Prints, per arm, the checkpoints and bytes under the sweep's
# train_runs/ and the export best/.
#   GLUE_DIR=/data/glue OUT=/data/runs BASE=/path/to/old/checkout benchmarks/checkpoint_disk.sh
set -u
: "${GLUE_DIR:?set GLUE_DIR to the folder that holds MRPC}" "${OUT:?set OUT to a folder for the runs}" "${BASE:?set BASE to the older checkout}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT/checkpoint_disk"
SWEEP=(+experiment=bert_mrpc model=minilm_l6 +glue_tsv=mrpc name=mrpc_disk cluster.num_workers=1)
for arm in base head; do
  checkout=$HERE
  [ "$arm" = base ] && checkout=$BASE
  run="$OUT/checkpoint_disk/$arm"
  echo "=== $(date +%T) $arm ($(git -C "$checkout" rev-parse --short HEAD)): $run"
  (cd "$checkout" && PYTHONPATH="$checkout" python -m hfsweep "${SWEEP[@]}" hydra.run.dir="$run" > "$run.log" 2>&1)
  echo "exit $?"
  checkpoints=$(find "$run/mrpc_disk/train_runs" -maxdepth 3 -type d -name 'checkpoint-*' | wc -l)
  echo "$arm: $checkpoints checkpoints, $(du -sb "$run/mrpc_disk/train_runs" | cut -f1) bytes in train_runs/, $(du -sb "$run/best" | cut -f1) in best/"
  grep -h "checkpoints:" "$run.log" || true
done
