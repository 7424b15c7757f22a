#!/usr/bin/env bash
# One simulated DistDGL "machine" M: its graph server (partition M) + its trainer (rank M).
# Must run inside its own mount namespace (run_distdgl.sh does: unshare -m --propagation private),
# because DGL names shared-memory segments after the graph name only, so two servers on one host
# would collide in /dev/shm. A private tmpfs on /dev/shm per "machine" gives each server+trainer pair
# its own segment namespace, as on two real hosts. Network stays shared: everything is 127.0.0.1.
# usage: machine.sh M NUM_MACHINES PART_CONFIG IP_CONFIG LOGDIR TIMEOUT_S THREADS EPOCHS [extra train.py args]
set -u
# (bench/distdgl copy of /work/shared/peers/distdgl: starts train.py; USE_GRAPHBOLT=1: server and
# trainer sample with GraphBolt, DGL >= 2.1)
M=$1; NM=$2; PART_CONFIG=$3; IP_CONFIG=$4; LOGDIR=$5; TMO=$6; THREADS=$7; EPOCHS=$8; shift 8
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PY:?set PY to a python that has torch and dgl (bench/setup_dgl.sh)}

. "$HERE/shm.sh" || exit 3  # the private /dev/shm (SHM_HUGE=always: 2 MiB pages, like fastsample's resident shards)
# what this machine's processes run with, for the result file (vs_distdgl.py reads it)
{ echo "GLIBC_TUNABLES=${GLIBC_TUNABLES:-}"; grep ' /dev/shm ' /proc/mounts | tail -1; } > "$LOGDIR/env$M.txt"
GRAPHBOLT=(); [ "${USE_GRAPHBOLT:-0}" = 1 ] && GRAPHBOLT=(--graphbolt)

common_env=(DGL_DIST_MODE=distributed DGL_NUM_SERVER=1 DGL_IP_CONFIG="$IP_CONFIG"
            DGL_GRAPH_FORMAT=csc GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS="$THREADS" PYTHONUNBUFFERED=1)

env "${common_env[@]}" DGL_ROLE=server DGL_SERVER_ID="$M" DGL_NUM_CLIENT="$NM" \
    DGL_CONF_PATH="$PART_CONFIG" OMP_NUM_THREADS=1 \
    timeout -k 10 "$TMO" "$PY" "$HERE/server.py" > "$LOGDIR/server$M.log" 2>&1 &
SPID=$!

env "${common_env[@]}" DGL_ROLE=client DGL_NUM_SAMPLER=0 \
    timeout -k 10 "$TMO" "$PY" "$HERE/train.py" "${GRAPHBOLT[@]}" --part_config "$PART_CONFIG" \
    --ip_config "$IP_CONFIG" --torch_port "${TORCH_PORT:-29631}" --machine_id "$M" --world_size "$NM" --threads "$THREADS" \
    --epochs "$EPOCHS" --out "$LOGDIR/results.jsonl" "$@" > "$LOGDIR/trainer$M.log" 2>&1 &
TPID=$!

trap 'kill $TPID $SPID 2>/dev/null' TERM INT
wait $TPID; TRC=$?
wait $SPID; SRC=$?
echo "machine $M: trainer rc=$TRC server rc=$SRC" >> "$LOGDIR/rc.txt"
exit $(( TRC != 0 ? TRC : SRC ))
