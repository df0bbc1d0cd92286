#!/usr/bin/env bash
# The search-method comparison of the Hugging Face + Ray blog post ("Hyperparameter Search with
# Transformers and Ray Tune": grid search, Bayesian optimisation with early stopping, population
# based training, on RTE) with hfsweep, on all-MiniLM-L6-v2 and RTE's own files, at equal compute:
#   grid  8 trials to the end (4 learning rates x 2 weight decays, FIFO);
#   bo    Optuna's TPE with ASHA over learning rate and weight decay, stopped by budget.trial_hours
#         set to what the grid spent (read from its summary);
#   pbt   a population of 8 trials of PBT over the same space (2 running at a time, the others
#         paused), perturbed every epoch (80 steps), to the end;
#   seeds each winner re-trained over seeds 1, 2, 3 (python -m hfsweep.replay; PBT's winner is
#         replayed at its final values, not as its schedule: replaying schedules is not built yet).
# Each stage skips what is already finished, so the script resumes across sessions (an interrupted
# stage: python -m hfsweep.resume OUT/rte_methods/STAGE, then run the script again).
#   GLUE_DIR=/data/glue OUT=/data/runs experiments/glue/rte_search_methods.sh grid bo pbt seeds
set -u
: "${GLUE_DIR:?set GLUE_DIR to the folder that holds the GLUE task folders (CoLA, SST-2, ...)}" "${OUT:?set OUT to a folder for the runs}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
RUNS="$OUT/rte_methods"
mkdir -p "$RUNS" "$OUT/logs"
COMMON=(+experiment=glue_minilm glue=rte)
# the preset's learning-rate grid becomes a log-uniform range (its values removed), beside weight decay
SPACE=(search_space.training.learning_rate.sampler=loguniform '~search_space.training.learning_rate.values'
       +search_space.training.learning_rate.low=1.0e-5 +search_space.training.learning_rate.high=3.0e-4
       '+search_space.training.weight_decay={sampler:uniform,low:0.0,high:0.3}')

stage() {  # name, then the sweep's overrides
  local name=$1; shift
  if [ -f "$RUNS/$name/best.json" ]; then echo "=== $name: finished already"; return; fi
  echo "=== $(date +%T) $name: start"
  python -m hfsweep "${COMMON[@]}" hydra.run.dir="$RUNS/$name" name="rte_$name" "$@" > "$OUT/logs/rte_$name.log" 2>&1
  local rc=$?
  echo "=== $(date +%T) $name: exit $rc"
}

for step in "$@"; do
  case $step in
    grid)  # budget.trial_hours is never spent here: it makes the summary say what the grid used
      stage grid scheduler=fifo scheduler.grace_period=null budget.trial_hours=1000 \
        'search_space.training.learning_rate.values=[3.0e-5,6.0e-5,1.0e-4,2.0e-4]' \
        '+search_space.training.weight_decay={sampler:grid,values:[0.0,0.1]}' ;;
    bo)
      used=$(sed -n 's/^  budget: *\([0-9.e+-]*\) of 1000 trial-hours.*/\1/p' "$OUT/logs/rte_grid.log" | tail -1)
      : "${used:?run the grid first: its summary gives the trial-hours the other methods get}"
      stage bo search_alg=optuna scheduler=asha num_samples=64 budget.trial_hours="$used" "${SPACE[@]}" ;;
    pbt)  # PBT copies a donor's latest checkpoint: every trial keeps its checkpoints. The population is
          # all 8 trials at once, of which 2 run at a time (one per core), the others paused. The run
          # reported was made before hfsweep bounded running trials by core, with the same effect from
          # cluster.max_concurrent_trials=8 cluster.resources_per_worker.CPU=3 and OMP_NUM_THREADS=1.
      stage pbt scheduler=pbt scheduler.grace_period=null scheduler.perturbation_interval=80 +scheduler.synch=true num_samples=8 \
        checkpoints.keep_per_trial=null "${SPACE[@]}" ;;
    seeds)
      for name in grid bo pbt; do
        if [ -f "$RUNS/$name/replay/replay.md" ]; then echo "=== $name seeds: finished already"; continue; fi
        echo "=== $(date +%T) $name: seeds"
        python -m hfsweep.replay "$RUNS/$name" --seeds 1 2 3 > "$OUT/logs/rte_${name}_seeds.log" 2>&1
        rc=$?
        echo "=== $(date +%T) $name seeds: exit $rc"
      done ;;
    *) echo "unknown step '$step': use grid, bo, pbt or seeds" >&2; exit 2 ;;
  esac
done
