#!/usr/bin/env bash
# The ablation the fair test's RTE result lacks (experiments/glue/notebook/fair_test.md, "The
# ablation"): run_glue.py's defaults (lr 5e-5, batch 8, 3 epochs, no weight decay) with no warm-up and
# with 6% warm-up, over seeds 1, 2, 3, in one sweep: a grid, run to the end (FIFO), with the fair
# test's data, padding, grouping and evaluation every 78 steps. The no-warm-up arm repeats the fair
# selection's defaults runs (the same seeds), so it also shows whether those reproduce.
# An interrupted run is continued with python -m hfsweep.resume when the script runs again.
#   GLUE_DIR=/data/glue OUT=/data/runs experiments/glue/rte_warmup.sh
set -u
: "${GLUE_DIR:?set GLUE_DIR to the folder that holds the GLUE task folders (RTE, ...)}" "${OUT:?set OUT to a folder for the runs}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
run="$OUT/rte_warmup"
mkdir -p "$OUT"
source "$(dirname "$0")/provenance.sh"
record_start "$GLUE_DIR/RTE" "$run"
echo "$(date +'%F %T') $(git -C "$(dirname "$0")" rev-parse --short HEAD)" >> "$run.commits"
if [ -f "$run/best.json" ]; then echo "=== $run: finished already"; exit 0; fi
if [ -f "$run/resolved_config.yaml" ]; then
  python -m hfsweep.resume "$run" >> "$run.log" 2>&1
else
  python -m hfsweep +experiment=glue_minilm_search glue=rte hydra.run.dir="$run" name=rte_warmup \
    training.eval_steps=78 training.save_steps=78 training.logging_steps=78 \
    '~search_space.training.learning_rate' '~search_space.training.per_device_train_batch_size' \
    '~search_space.training.num_train_epochs' '~search_space.training.weight_decay' \
    'search_space.training.warmup_steps={sampler:grid,values:[0.0,0.06]}' \
    '+search_space.seed={sampler:grid,values:[1,2,3]}' \
    search_alg=grid search_alg.defaults_trial=false scheduler=fifo '~scheduler.grace_period' \
    select.top_k=0 num_samples=1 >> "$run.log" 2>&1
fi
rc=$?
echo "$(date +'%F %T') exit $rc" >> "$run.commits"
exit $rc
