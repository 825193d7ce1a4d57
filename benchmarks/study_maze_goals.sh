#!/usr/bin/env bash
# The maze agent's cheese-or-corner numbers of docs/misgeneralization.md (maze part): the published
# goal-misgeneralization agent on exploratory levels (settings chosen there: bins, horizon) and then on
# fresh confirmatory levels. Each batch of 32 episodes is kept under $OUT/<set>/batches, so a killed run
# resumes where it stopped; the analysis folders are $OUT/<set>/analysis/decision-square.
#   OUT=/work/runs50/maze benchmarks/study_maze_goals.sh
set -euo pipefail
OUT=${OUT:-runs/maze}
PYTHON=${PYTHON:-python}
for spec in explore:1000000:100000:320 confirm:2000000:1000000:3200; do
    IFS=: read -r name start num episodes <<<"$spec"
    nice -n 15 env OMP_NUM_THREADS=1 "$PYTHON" -m proclab analyze decision-square \
        --agent maze/goal-misgeneralization --device cpu --precision fp32 --torch-threads 1 \
        --levels "$start:$num" --episodes "$episodes" --batch 32 --seed 0 \
        --keep-batches "$OUT/$name/batches" --out "$OUT/$name/analysis"
done
