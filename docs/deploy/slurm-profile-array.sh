#!/bin/bash
# Profile a model across a Slurm array: task i of N runs `kvplan profile --shard i/N`, then one merge
# job (afterok on the whole array) joins the shards into profile.json.
#
#   MODEL=/models/Llama-3.1-8B-Instruct OUT=/shared/profiles/llama8b N=16 \
#     bash docs/deploy/slurm-profile-array.sh
#
# Every task must see the same model file, calibration file and options (the merge refuses shards
# whose model fingerprint, calibration hash or settings differ). Extra profile options go in
# PROFILE_ARGS, e.g. PROFILE_ARGS="--mode kivi --group-size 32 --residual-length 128".
set -euo pipefail

: "${MODEL:?set MODEL to a .gguf file or an HF model directory}"
: "${OUT:?set OUT to a shared directory for the shard files}"
N="${N:-8}"
KVPLAN="${KVPLAN:-kvplan}"
CPUS="${CPUS:-8}"
PROFILE_ARGS="${PROFILE_ARGS:-}"
mkdir -p "$OUT/logs"

array_job=$(sbatch --parsable \
  --job-name=kvplan-profile \
  --array="0-$((N - 1))" \
  --cpus-per-task="$CPUS" \
  --mem="${MEM:-32G}" \
  --time="${TIME:-04:00:00}" \
  --requeue \
  --output="$OUT/logs/shard-%a.log" \
  --wrap="$KVPLAN profile --model '$MODEL' $PROFILE_ARGS --threads $CPUS \
          --shard \${SLURM_ARRAY_TASK_ID}/$N --resume -o \"$OUT/shard-\${SLURM_ARRAY_TASK_ID}.json\"")
echo "submitted array job $array_job ($N shards)"

# --resume above makes a requeued (preempted) task continue from its last finished layer.
merge_job=$(sbatch --parsable \
  --job-name=kvplan-profile-merge \
  --dependency="afterok:$array_job" \
  --cpus-per-task=1 \
  --time=00:10:00 \
  --output="$OUT/logs/merge.log" \
  --wrap="$KVPLAN profile merge -o '$OUT/profile.json' $(for i in $(seq 0 $((N - 1))); do
            printf "'%s' " "$OUT/shard-$i.json"; done)")
echo "submitted merge job $merge_job -> $OUT/profile.json"
