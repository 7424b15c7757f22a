#!/bin/sh
# Start one MPI rank inside its network namespace (made by bench/netns.py):
#     mpiexec -n P bench/netns_exec.sh PREFIX MASTER_ADDR python -m fastsample.train --backend gloo ...
# The rank comes from PMI_RANK (set by MPICH's hydra; OMPI_COMM_WORLD_RANK and
# PMIX_RANK for Open MPI); namespace PREFIX-r<rank>, veth PREFIX r<rank>. MASTER_ADDR
# is rank 0's address, which fastsample.comm.torch_dist advertises for the gloo
# rendezvous; GLOO_SOCKET_IFNAME makes gloo use the rank's veth. The PMI fd that
# hydra passes (PMI_FD) survives `ip netns exec`, which execs in place.
set -eu
if [ $# -lt 3 ]; then
    echo "usage: $0 PREFIX MASTER_ADDR COMMAND [ARG...]" >&2
    exit 2
fi
prefix=$1
master=$2
shift 2
rank=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-}}}
if [ -z "$rank" ]; then
    echo "$0: no PMI_RANK in the environment (run under mpiexec)" >&2
    exit 2
fi
exec ip netns exec "$prefix-r$rank" env MASTER_ADDR="$master" GLOO_SOCKET_IFNAME="${prefix}r$rank" "$@"
