#!/usr/bin/env bash
# MLPerf Training's GNN benchmark recipe, end to end: an IGBH graph, partitioned, then the
# R-GAT trained with the reference's hyperparameters, evaluated on the validation papers
# every 0.05 epoch, until the target validation accuracy; prints the time to it. Exits with
# the training's status: 0 when the target was reached, 5 when the epochs ran out first
# (MLPerf counts that run as failed), others as jobs/README.md lists them.
#
#   jobs/mlperf_rgat.sh                           # the IGBH-schema generator's hetero-small, 2 ranks
#   IGB_ROOT=/data/igbh IGB_SIZE=full FASTSAMPLE_RANKS=16 jobs/mlperf_rgat.sh
#   mkdir -p logs; sbatch --nodes=16 --ntasks-per-node=1 --cpus-per-task=64 jobs/mlperf_rgat.sh   # ranks: SLURM_NTASKS
#
# Environment (all optional):
#   IGB_ROOT, IGB_SIZE   IGB's processed layout (python -m fastsample.data igb) and its size;
#                        without them, the IGBH-schema generator's FASTSAMPLE_PRESET (hetero-small)
#   FASTSAMPLE_WORK      where the dataset and its partition go (data/mlperf-rgat)
#   FASTSAMPLE_RANKS     ranks (SLURM_NTASKS under Slurm, else 2)
#   FASTSAMPLE_TARGET    the validation accuracy to stop at (0.72 on IGBH, the benchmark's;
#                        0.90 on the generator's graphs, whose 16 classes are easier)
#   FASTSAMPLE_EPOCHS    the most epochs to train if the target is not reached (20)
#   FASTSAMPLE_PYTHON    the interpreter (.venv/bin/python where present)
# Extra arguments go to python -m fastsample.train (e.g. --threads 4, --precision bf16).
#
# The reference's settings (mlcommons/training, retired_benchmarks/rgat): 3 layers, fanouts
# 15,10,5, batch 512 per rank, hidden 512, 4 heads, Adam lr 0.001, dropout 0.2, evaluation
# every 0.05 epoch on the validation papers (sampled with the training fanouts, as the
# reference's evaluation loader does), target 0.72.
# Under sbatch: output to logs/ (create it first, as for train.sbatch); the data and its
# partition are made in the batch step, on the first node, before the ranks start.
#SBATCH --job-name=mlperf-rgat
#SBATCH --output=logs/%x-%j.out
#SBATCH --time=04:00:00
set -euo pipefail

PY=${FASTSAMPLE_PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
WORK=${FASTSAMPLE_WORK:-data/mlperf-rgat}
RANKS=${FASTSAMPLE_RANKS:-${SLURM_NTASKS:-2}}
if [ -n "${SLURM_JOB_ID:-}" ] && [ "$RANKS" != "${SLURM_NTASKS:-$RANKS}" ]; then  # srun starts SLURM_NTASKS
  echo "mlperf_rgat: FASTSAMPLE_RANKS=$RANKS, but this job has SLURM_NTASKS=$SLURM_NTASKS ranks (the partition" \
       "would be for the wrong count): leave FASTSAMPLE_RANKS unset under Slurm" >&2
  exit 2
fi
EPOCHS=${FASTSAMPLE_EPOCHS:-20}
BATCH=512

if [ -n "${IGB_ROOT:-}" ]; then
  DATA=$WORK/igbh-${IGB_SIZE:?IGB_SIZE: tiny, small, medium, large or full}
  TARGET=${FASTSAMPLE_TARGET:-0.72}
  [ -e "$DATA/meta.json" ] || "$PY" -m fastsample.data igb "$IGB_ROOT" "$DATA" --size "$IGB_SIZE"
else
  PRESET=${FASTSAMPLE_PRESET:-hetero-small}
  DATA=$WORK/$PRESET
  TARGET=${FASTSAMPLE_TARGET:-0.90}
  [ -e "$DATA/meta.json" ] || "$PY" -m fastsample.data synth --preset "$PRESET" "$DATA"
fi
PART=$DATA-$RANKS
[ -e "$PART/partition.json" ] || "$PY" -m fastsample.partition "$DATA" "$PART" --parts "$RANKS"

# every 0.05 epoch: a twentieth of the steps of an epoch (the largest rank's share of the
# training papers in batches of BATCH), at least every step
EVAL_STEPS=$("$PY" -c "
import json, math, sys
parts = json.load(open(sys.argv[1] + '/partition.json'))['parts']
print(max(1, round(0.05 * math.ceil(max(p['train'] for p in parts) / $BATCH))))" "$PART")

THREADS=()
if [ -n "${SLURM_JOB_ID:-}" ]; then
  LAUNCH=(srun --mpi=pmi2 --kill-on-bad-exit=1)  # a rank that fails ends the job at once
  if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then  # one thread pool per rank, sized to its task's cores
    export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK NUMBA_NUM_THREADS=$SLURM_CPUS_PER_TASK
    THREADS=(--threads "$SLURM_CPUS_PER_TASK")
  fi
else
  MPIEXEC=$(dirname "$PY")/mpiexec
  [ -x "$MPIEXEC" ] || MPIEXEC=mpiexec
  LAUNCH=("$MPIEXEC" -n "$RANKS")
fi
echo "mlperf_rgat: $PART on $RANKS ranks, target val acc $TARGET, evaluation every $EVAL_STEPS steps"
"${LAUNCH[@]}" "$PY" -m fastsample.train --data "$PART" --model rgat --layers 3 --fanouts 15,10,5 \
  --batch-size "$BATCH" --hidden 512 --heads 4 --lr 0.001 --dropout 0.2 --epochs "$EPOCHS" \
  --eval-every 0 --eval-every-steps "$EVAL_STEPS" --target-val-acc "$TARGET" "${THREADS[@]}" "$@"
