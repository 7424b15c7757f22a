#!/usr/bin/env bash
# (bench/distdgl copy of /work/shared/peers/distdgl; ports: DGL_BASE_PORT (31050), TORCH_PORT (29631))
# Launch DistDGL on this single host: NUM_MACHINES simulated machines, each = 1 graph server
# (its partition) + 1 trainer, all talking over 127.0.0.1. No ssh, no DGL launch.py.
# usage: run_distdgl.sh PART_CONFIG LOGDIR [THREADS_PER_TRAINER=1] [EPOCHS=3] [TIMEOUT_S=1200] [extra train.py args]
# NUM_MACHINES is read from the partition config (num_parts).
set -u
PART_CONFIG=$(readlink -f "$1"); LOGDIR=$2; THREADS=${3:-1}; EPOCHS=${4:-3}; TMO=${5:-1200}
shift $(( $# < 5 ? $# : 5 ))
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PY:?set PY to a python that has torch and dgl (bench/setup_dgl.sh)}
mkdir -p "$LOGDIR"; LOGDIR=$(readlink -f "$LOGDIR"); rm -f "$LOGDIR"/*.log "$LOGDIR"/rc.txt "$LOGDIR"/results.jsonl "$LOGDIR"/env*.txt
NM=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['num_parts'])" "$PART_CONFIG")
IP_CONFIG=$LOGDIR/ip_config.txt
: > "$IP_CONFIG"
for ((m = 0; m < NM; m++)); do echo "127.0.0.1 $((${DGL_BASE_PORT:-31050} + 10 * m))" >> "$IP_CONFIG"; done

# memory monitor: system-wide used memory (MemTotal - MemAvailable, includes the /dev/shm tmpfs
# copies) sampled every 0.5 s
( base=$(awk '/MemTotal/{t=$2}/MemAvailable/{a=$2}END{print t-a}' /proc/meminfo); echo "base_kib $base"
  while true; do awk '/MemTotal/{t=$2}/MemAvailable/{a=$2}END{print t-a}' /proc/meminfo; sleep 0.5; done
) > "$LOGDIR/mem.txt" &
MONPID=$!

PIDS=()
T0=$(date +%s.%N)
for ((m = 0; m < NM; m++)); do
  timeout -k 15 $((TMO + 30)) unshare -m --propagation private \
    bash "$HERE/machine.sh" "$m" "$NM" "$PART_CONFIG" "$IP_CONFIG" "$LOGDIR" "$TMO" "$THREADS" "$EPOCHS" "$@" &
  PIDS+=($!)
done
cleanup() { kill "${PIDS[@]}" "$MONPID" 2>/dev/null; }
trap cleanup TERM INT
RC=0
for p in "${PIDS[@]}"; do wait "$p" || RC=$?; done
T1=$(date +%s.%N)
kill "$MONPID" 2>/dev/null; wait "$MONPID" 2>/dev/null
awk -v t0="$T0" -v t1="$T1" 'NR==1{b=$2; next} $1>m{m=$1} END{printf "wall %.1f s, peak system memory used %.2f GiB (%.2f GiB above the %.2f GiB before start)\n", t1-t0, m/2^20, (m-b)/2^20, b/2^20}' "$LOGDIR/mem.txt" | tee "$LOGDIR/wall_mem.txt"
cat "$LOGDIR/rc.txt" 2>/dev/null
grep -h SUMMARY "$LOGDIR"/trainer*.log
exit $RC
