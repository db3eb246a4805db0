#!/usr/bin/env bash
# What a user sees from the shipped configs, in one folder, so that two checkouts can be diffed byte for byte
# (issue 43: a refactor changes none of it):
#   bash scripts/user_outputs.sh OUT [WORK]    (from the repository root, in its venv; offline, CPU)
# - OUT/plan: `graphctx plan` text, --json, --cost and --cost --json of every configs/*.yaml;
# - the tiny job in WORK (default: a new temporary folder) with its own cache: train.py, evaluate.py on the
#   first 4 test questions, export, retrieve, enhance and answer one question; OUT/eval and OUT/export hold
#   the files they wrote, OUT/cache_keys.txt the cache's file names (its keys).
# The dataset cache's key holds the tokenizer's absolute path, so compare two checkouts with the same WORK
# (move the first one's aside before the second run).
set -euo pipefail
out=$(realpath -m "$1"); mkdir -p "$out/plan"
work=$(realpath -m "${2:-$(mktemp -d)}"); mkdir -p "$work"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
counts=train=1000,validation=100,test=100
for config in configs/*.yaml; do
  name=$(basename "$config" .yaml)
  graphctx plan --config "$config" > "$out/plan/$name.txt"
  graphctx plan --config "$config" --json > "$out/plan/$name.json"
  graphctx plan --config "$config" --cost --counts "$counts" > "$out/plan/$name.cost.txt"
  graphctx plan --config "$config" --cost --counts "$counts" --json > "$out/plan/$name.cost.json"
done
export GRAPHCTX_CACHE="$work/cache"
run="$work/runs/tiny"
q="How do I mount a USB drive from the command line?"
python train.py --config configs/tiny.yaml --trainer.default_root_dir "$run" > "$out/train.stdout" 2> "$out/train.stderr"
python evaluate.py --config configs/tiny.yaml --trainer.default_root_dir "$run" --evaluation.limit 4 \
  > "$out/evaluate.stdout" 2> "$out/evaluate.stderr"
graphctx export --run "$run/eval" --to "$work/export" > "$out/export.stdout"
graphctx retrieve --config configs/tiny.yaml --trainer.default_root_dir "$run" --question "$q" --json > "$out/retrieve.json"
graphctx enhance --config configs/tiny.yaml --trainer.default_root_dir "$run" --question "$q" --json > "$out/enhance.json"
graphctx answer --config configs/tiny.yaml --trainer.default_root_dir "$run" --question "$q" > "$out/answer.txt" 2> "$out/answer.stderr"
for part in eval export; do
  from=$([ "$part" = eval ] && echo "$run/eval" || echo "$work/export")
  (cd "$from" && find . -type f ! -name '*.lock' | sort | while read -r f; do
    mkdir -p "$out/$part/$(dirname "$f")"; cp "$f" "$out/$part/$f"; done)
done
(cd "$GRAPHCTX_CACHE" && find . -type f | sort) > "$out/cache_keys.txt"
sed -i "s#$work#WORK#g" "$out"/*.stdout "$out"/*.txt
echo "$out"
