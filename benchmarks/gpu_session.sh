#!/usr/bin/env bash
# GPU measurements in pieces of at most ten minutes (docs/gpu.md has the numbers and how to run it).
#
# A GPU host often has its own Python (3.12 here) with a CUDA torch and numpy 2, and no package index.
# The few packages proclab needs beyond such an image travel as wheels in .whl/ (procgen-mirror,
# gym3, gym 0.26, tyro, zarr, ...), CleanRL's script and gym 0.23.1 in .whl/clean/, the Debian
# packages of libGL and GLib in .gl/, and a run continued across machines travels as a tarball:
# every stage below is one piece of a session.
#
#   bash benchmarks/gpu_session.sh STAGE [STAGE ...]      (results go to $OUT, default ./gpu-out)
#
# stages:
#   setup           install the carried wheels into /tmp/site (and /tmp/site-clean for CleanRL)
#   ppo-sps         CleanRL vs proclab --preset cleanrl, same game and steps (SPS_UPDATES updates)
#   ppo-phases      where a PPO update's time goes on this GPU host (env, inference, learner)
#   ppo-learn       PPO on starpilot easy for LEARN_SECONDS, resumed from $RESUME_TAR when given
#   impala          impala-multi-easy6 with 48 envs and actor processes, IMPALA_SECONDS
#   wm              world-model training throughput, paper and small sizes, on the GPU
#   trex            T-REX batched vs parity, time to the parity run's best validation accuracy
#   tests           the default test suite on this Python (CPU only)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/session.log"; }

stage_setup() {
    # procgen's renderer links libGL.so.1 and GLib, which a CUDA image may lack
    if [ -d .gl ]; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
    fi
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    if compgen -G ".whl/clean/*.whl" > /dev/null; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-clean .whl/clean/*.whl
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/session.log"
    $PY -c 'import sys, torch, numpy, procgen; print("python", sys.version.split()[0], "torch", torch.__version__,
        "numpy", numpy.__version__, "cuda", torch.cuda.is_available())' | tee -a "$OUT/session.log"
    nproc | sed 's/^/cpus /' | tee -a "$OUT/session.log"
}

proclab() { $PY -m proclab "$@"; }

# SPS of a finished proclab run: env steps over training-loop seconds (as CleanRL prints it).
run_sps() { $PY - "$1" <<'EOF'
import sys
from pathlib import Path
from proclab.io.run_dirs import read_metrics
m = read_metrics(next(Path(sys.argv[1]).rglob("metrics.csv")).parent)
print(round(m["step"][-1] / m["wall_time"][-1], 1))
EOF
}

stage_ppo_sps() {
    # variants are PRECISION[:ENV_THREADS]; SPS_CLEANRL=0 skips CleanRL (ratios then against the first variant)
    local updates=${SPS_UPDATES:-20} game=${SPS_GAME:-starpilot}
    local steps=$((updates * 64 * 256)) dir base=""
    dir=$(mktemp -d)
    if [ "${SPS_CLEANRL:-1}" = 1 ]; then
        log "cleanrl ppo_procgen.py, $updates updates"
        (cd "$dir" && PYTHONPATH=/tmp/site-clean:/tmp/site $PY "$OLDPWD/.whl/clean/ppo_procgen.py" \
            --env-id "$game" --total-timesteps "$steps" > "$OUT/cleanrl.log" 2>&1)
        base=$(grep -o 'SPS: [0-9]*' "$OUT/cleanrl.log" | tail -1 | cut -d' ' -f2)
        log "cleanrl SPS $base"
        echo "{\"benchmark\": \"ppo_sps_gpu\", \"game\": \"$game\", \"updates\": $updates, \"path\": \"cleanrl\", \"sps\": $base}" | tee -a "$OUT/results.jsonl"
    fi
    for variant in ${SPS_VARIANTS:-auto fp32}; do
        local precision=${variant%%:*} threads=4 sps
        [[ $variant == *:* ]] && threads=${variant##*:}
        rm -rf "$dir/runs"
        proclab train --preset cleanrl --game "$game" --total-steps "$steps" --precision "$precision" \
            --num-threads "$threads" --run-root "$dir/runs" --no-tensorboard --checkpoint-every 1000000000 \
            > "$OUT/proclab-$precision-$threads.log" 2>&1
        sps=$(run_sps "$dir/runs")
        base=${base:-$sps}
        log "proclab $precision, $threads env threads: SPS $sps"
        echo "{\"benchmark\": \"ppo_sps_gpu\", \"game\": \"$game\", \"updates\": $updates, \"path\": \"proclab\", \"precision\": \"$precision\", \"env_threads\": $threads, \"sps\": $sps, \"ratio_vs_baseline\": $($PY -c "print(round($sps / $base, 3))")}" | tee -a "$OUT/results.jsonl"
    done
}

stage_ppo_phases() {
    log "PPO phase times"
    $PY benchmarks/ppo_profile.py --device cuda --updates 4 --precisions auto --env-threads 4 8 16 2>&1 | grep '^{' | tee -a "$OUT/results.jsonl"
}

stage_ppo_learn() {
    local seconds=${LEARN_SECONDS:-240} root=/tmp/learn
    if [ -n "${RESUME_TAR:-}" ] && [ -f "$RESUME_TAR" ]; then
        mkdir -p "$root" && tar -xzf "$RESUME_TAR" -C "$root"
        local run
        run=$(dirname "$(find "$root" -name config.json | head -1)")
        log "resuming $run for $seconds s"
        timeout -s KILL "$seconds" $PY -m proclab train --resume "$run" > "$OUT/learn.log" 2>&1
    else
        log "new starpilot run for $seconds s"
        timeout -s KILL "$seconds" $PY -m proclab train --preset cleanrl --game starpilot --seed 1 \
            --run-root "$root" --checkpoint-every 327680 --keep-checkpoints 1 --no-tensorboard > "$OUT/learn.log" 2>&1
    fi
    tar -czf "$OUT/learn-run.tgz" -C "$root" .
    cp "$(find "$root" -name metrics.csv | head -1)" "$OUT/learn-metrics.csv"
    log "ppo-learn: $(tail -1 "$OUT/learn-metrics.csv" | cut -c1-200)"
}

stage_impala() {
    local seconds=${IMPALA_SECONDS:-150} root=/tmp/impala
    log "impala-multi-easy6, 48 envs, ${IMPALA_ACTORS:-12} actor processes, $seconds s"
    timeout -s INT "$seconds" $PY -m proclab train --preset impala-multi-easy6 --num-envs 48 \
        --num-actors "${IMPALA_ACTORS:-12}" --run-root "$root" --no-tensorboard > "$OUT/impala.log" 2>&1
    cp "$(find "$root" -name metrics.csv | head -1)" "$OUT/impala-metrics.csv" 2>/dev/null
    log "impala: $(tail -1 "$OUT/impala-metrics.csv" | cut -c1-300)"
}

stage_wm() {
    log "world-model throughput"
    $PY benchmarks/wm_train_throughput.py --device cuda 2>&1 | tee -a "$OUT/results.jsonl"
}

stage_trex() {
    log "T-REX batched vs parity"
    $PY benchmarks/trex_speed.py --budget ${TREX_BUDGET:-60} --common-args "--device cuda" --run-root /tmp/trex 2>&1 | tee -a "$OUT/results.jsonl"
}

stage_tests() {
    log "test suite on $($PY --version)"
    $PY -m pytest -q -n 8 -p no:cacheprovider 2>&1 | tail -15 | tee "$OUT/tests.log"
}

for stage in "$@"; do
    "stage_${stage//-/_}" || log "stage $stage failed ($?)"
done
