# Sourced by machine.sh, inside its own mount namespace: mount this simulated machine's private
# /dev/shm (DistDGL keeps the partition's graph and features there). SHM_SIZE: its size (8g);
# SHM_HUGE: tmpfs's huge= option (always: transparent huge pages, as fastsample's feature shards
# get in anonymous memory; unset: 4 KiB pages, as DistDGL is shipped and run).
mount -t tmpfs -o "size=${SHM_SIZE:-8g}${SHM_HUGE:+,huge=$SHM_HUGE}" tmpfs /dev/shm \
  || { echo "cannot mount private /dev/shm (size=${SHM_SIZE:-8g}${SHM_HUGE:+,huge=$SHM_HUGE})"; return 3; }
