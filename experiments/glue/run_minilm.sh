#!/usr/bin/env bash
# GLUE on all-MiniLM-L6-v2 (model=minilm_l6), as experiments/glue/notebook/history.md reports it: per task,
# the learning-rate sweep (+experiment=glue_minilm), its best configuration re-trained over seeds
# 1, 2, 3 (python -m hfsweep.glue), and one run with run_glue.py's defaults and no search
# (learning rate 5e-5, batch 8, 3 epochs, no warmup).
#   GLUE_DIR=/data/glue OUT=/data/runs experiments/glue/run_minilm.sh rte wnli mrpc stsb cola sst2
set -u
: "${GLUE_DIR:?set GLUE_DIR to the folder that holds the GLUE task folders (CoLA, SST-2, ...)}" "${OUT:?set OUT to a folder for the runs}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
declare -A STEPS_PER_EPOCH_AT_8=([rte]=312 [wnli]=80 [mrpc]=459 [stsb]=719 [cola]=1069 [sst2]=1250)
# SST-2 trains on its first 10,000 sentences (of 67,349; 55% positive, as the whole set), 3 epochs
# of 313 steps: the whole set needs about an hour a trial on 2 cores. The dev set is whole.
declare -A SUBSAMPLE=([sst2]="data.max_train_samples=10000")
declare -A SUBSAMPLE_STEPS=([sst2]="training.max_steps=939 training.eval_steps=313 training.save_steps=313 training.logging_steps=313 scheduler.grace_period=313")
mkdir -p "$OUT/glue_all" "$OUT/logs"
for task in "$@"; do
  echo "=== $(date +%T) $task: sweep"
  python -m hfsweep -m +experiment=glue_minilm glue="$task" hydra.sweep.dir="$OUT/glue_$task" \
    ${SUBSAMPLE[$task]:-} ${SUBSAMPLE_STEPS[$task]:-} > "$OUT/logs/sweep_$task.log" 2>&1
  ln -sfn "$OUT/glue_$task/0" "$OUT/glue_all/$task"
  echo "=== $(date +%T) $task: seeds"
  python -m hfsweep.glue "$OUT/glue_all" --seeds 1 2 3 > "$OUT/logs/seeds_$task.log" 2>&1
  e=${STEPS_PER_EPOCH_AT_8[$task]}
  echo "=== $(date +%T) $task: run_glue.py's defaults"
  python -m hfsweep +experiment=glue_minilm glue="$task" hydra.run.dir="$OUT/baseline/$task" name="baseline_$task" \
    'search_space.training.learning_rate.values=[5.0e-5]' training.per_device_train_batch_size=8 \
    training.max_steps=$((3 * e)) training.eval_steps="$e" training.save_steps="$e" training.logging_steps="$e" \
    training.warmup_steps=0 training.train_sampling_strategy=random scheduler=fifo scheduler.grace_period=null ${SUBSAMPLE[$task]:-} \
    > "$OUT/logs/baseline_$task.log" 2>&1
done
echo "=== $(date +%T) done: $OUT/glue_all/glue.md"
