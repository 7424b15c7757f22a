#!/usr/bin/env bash
# The --device cuda path end to end, on a machine with a CUDA GPU: each job below runs
# twice with the same seed, on the CPU and on the GPU, and the two runs' per-step losses
# are compared. The model runs on the GPU; sampling and the gather stay on the CPU (the
# same code path the CPU tests cover), so the losses agree to float rounding: the first
# step's within 1e-4, every step's within 2e-2 (differences grow as the runs train); bf16
# within 1e-2 and 5e-2 (the CPU's and the GPU's bf16 products round differently).
#
#   bench/gpu_check.sh      # env: WORK=/tmp/gpu-check PY=python3 MPIEXEC=mpiexec THREADS=4 (per rank),
#                           #      ONLY=name,name (those jobs alone; the data is made for all)
#
# Settings: the small untyped preset (100k nodes) and hetero-small (52k nodes; its mag
# layout: papers featured, the other types learnable), 2 ranks x THREADS threads (one GPU
# shared by both ranks) and 1 rank with NCCL, 2 epochs x 6 steps. It prints one line per
# job and exits non-zero if any job failed or disagreed. DEVICE=cpu runs the script's own
# plumbing on a machine without a GPU (both runs then on the CPU).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
MPIEXEC=${MPIEXEC:-mpiexec}
WORK=${WORK:-/tmp/gpu-check}
DEVICE=${DEVICE:-cuda}
LOGS=${LOGS:-$WORK/logs}
mkdir -p "$WORK" "$LOGS"
fail=0

quiet() { "$@" >>"$LOGS/setup.log" 2>&1 || { echo "setup failed: $*"; tail -20 "$LOGS/setup.log"; exit 1; }; }

echo "== data ($(date +%T))"
quiet $PY -m fastsample.data synth --preset small "$WORK/small" --overwrite --quiet
quiet $PY -m fastsample.partition "$WORK/small" "$WORK/small-2" --parts 2 --overwrite
quiet $PY -m fastsample.partition "$WORK/small" "$WORK/small-1" --parts 1 --overwrite
quiet $PY -m fastsample.data link-split "$WORK/small" "$WORK/small-link" --overwrite
quiet $PY -m fastsample.partition "$WORK/small-link" "$WORK/small-link-2" --parts 2 --overwrite
quiet $PY -m fastsample.data synth --preset hetero-small "$WORK/hs" --overwrite --quiet
quiet $PY bench/ogb_hetero_layout.py "$WORK/hs" "$WORK/hs-raw" --featured paper
quiet $PY -m fastsample.data ogb "$WORK/hs-raw" "$WORK/hs-mag" --overwrite
quiet $PY -m fastsample.partition "$WORK/hs-mag" "$WORK/hs-mag-2" --parts 2 --overwrite
quiet $PY -m fastsample.data link-split "$WORK/hs" "$WORK/hs-link" --relation author,rev_written_by,paper --overwrite
quiet $PY -m fastsample.partition "$WORK/hs-link" "$WORK/hs-link-2" --parts 2 --overwrite

# job NAME RANKS ARGS...: the same training on the CPU and on $DEVICE; compare step losses.
job() {
  local name=$1 ranks=$2; shift 2
  [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]] && return  # ONLY=rgcn-mag,rgcn-link: those jobs alone
  local common=(--epochs 2 --max-steps 6 --eval-every 0 --threads "${THREADS:-4}" --quiet "$@") rc
  for dev in cpu "$DEVICE"; do
    local args=("${common[@]}")
    # the CPU reference run talks over MPI where the GPU run uses NCCL
    [ "$dev" = cpu ] && args=("${args[@]/nccl/mpi}")
    rm -f "$WORK/$name-$dev.json"
    timeout 300 "$MPIEXEC" -n "$ranks" $PY -m fastsample.train "${args[@]}" --device "$dev" \
      --log-json "$WORK/$name-$dev.json" >"$LOGS/$name-$dev.log" 2>&1
    rc=$?
    if [ $rc != 0 ]; then echo "FAIL $name on $dev: exit $rc"; tail -15 "$LOGS/$name-$dev.log"; fail=1; return; fi
  done
  $PY - "$WORK/$name-cpu.json" "$WORK/$name-$DEVICE.json" "$name" "${FIRST:-1e-4}" "${ALL:-2e-2}" <<'EOF' || fail=1
import json, sys
def losses(path):
    return [l for rec in map(json.loads, open(path)) for l in rec["step_losses"]]
def val(path):
    last = [json.loads(line) for line in open(path)][-1]
    v = last.get("val_acc") if last.get("val_acc") is not None else last.get("val_auc")
    return "-" if v is None else f"{v:.4f}"
a, b, name = losses(sys.argv[1]), losses(sys.argv[2]), sys.argv[3]
first, every = float(sys.argv[4]), float(sys.argv[5])
rel = [abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b)]
ok = len(a) == len(b) > 0 and rel[0] <= first and max(rel) <= every
print(f"{'ok  ' if ok else 'FAIL'} {name}: {len(a)} steps, first loss {a[0]:.6f} cpu / {b[0]:.6f} gpu, "
      f"largest relative difference {max(rel):.1e} (step {rel.index(max(rel))}), "
      f"last val {val(sys.argv[1])} cpu / {val(sys.argv[2])} gpu")
sys.exit(0 if ok else 1)
EOF
}

echo "== jobs ($(date +%T))"
job sage-2ranks 2 --data "$WORK/small-2" --fanouts 15,10,5 --batch-size 1000 --eval-every 1
job sage-nccl 1 --data "$WORK/small-1" --fanouts 15,10,5 --batch-size 1000 --backend nccl
job sage-vanilla-cache 2 --data "$WORK/small-2" --fanouts 10,10 --mode vanilla --cache-fraction 0.2 --prefetch 1
FIRST=1e-2 ALL=5e-2 job sage-bf16 2 --data "$WORK/small-2" --fanouts 10,10 --precision bf16
job gat 2 --data "$WORK/small-2" --fanouts 10,10 --model rgat --hidden 64
job link 2 --data "$WORK/small-link-2" --task link --eval-every 1
job rgcn-mag 2 --data "$WORK/hs-mag-2" --fanouts 10,10 --batch-size 256 --hidden 64 --embed-dim 32 --eval-every 1 --eval full
job rgat-mag 2 --data "$WORK/hs-mag-2" --fanouts 10,10 --batch-size 256 --hidden 64 --embed-dim 32 --model rgat
job rgcn-link 2 --data "$WORK/hs-link-2" --task link --batch-size 256 --hidden 64 --eval-every 1
echo "== done ($(date +%T)): $([ $fail = 0 ] && echo 'every job agreed' || echo 'some job FAILED')"
exit $fail
