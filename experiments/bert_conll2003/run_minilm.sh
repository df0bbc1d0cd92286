#!/usr/bin/env bash
# CoNLL-2003 NER on all-MiniLM-L6-v2 (model=minilm_l6), as experiments/bert_conll2003/README.md
# reports it: the learning-rate sweep (+experiment=conll_minilm), then one run with run_ner.py's
# defaults and no search (learning rate 5e-5, batch 8, 3 epochs, no warmup).
#   CONLL_DIR=/data/conll2003 OUT=/data/runs experiments/bert_conll2003/run_minilm.sh
set -u
: "${CONLL_DIR:?set CONLL_DIR to a folder holding train.txt and validation.txt}" "${OUT:?set OUT to a folder for the runs}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
mkdir -p "$OUT/logs"
echo "=== $(date +%T) conll: sweep"
python -m hfsweep +experiment=conll_minilm hydra.run.dir="$OUT/conll_minilm" > "$OUT/logs/sweep_conll.log" 2>&1
rc=$?   # read before the $(date) below, whose own exit status would replace it
echo "=== $(date +%T) conll: exit $rc; run_ner.py's defaults"
e=1756   # steps per epoch: 14,041 sentences at 8 a step
python -m hfsweep +experiment=conll_minilm hydra.run.dir="$OUT/baseline/conll" name=baseline_conll \
  'search_space.training.learning_rate.values=[5.0e-5]' training.per_device_train_batch_size=8 \
  training.max_steps=$((3 * e)) training.eval_steps="$e" training.save_steps="$e" training.logging_steps="$e" \
  training.warmup_steps=0 training.train_sampling_strategy=random scheduler=fifo scheduler.grace_period=null \
  > "$OUT/logs/baseline_conll.log" 2>&1
rc=$?
echo "=== $(date +%T) done: exit $rc"
