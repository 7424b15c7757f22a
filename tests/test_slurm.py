"""jobs/partition.sbatch then jobs/train.sbatch on a real single-node Slurm (slurmctld +
slurmd + munge, this machine), submitted as jobs/README.md says."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.trainer.runlog import read_records

DAEMONS = ("slurmctld", "slurmd", "munged", "sbatch", "sinfo", "runuser")

missing = [d for d in DAEMONS if shutil.which(d) is None]
pytestmark = [
    pytest.mark.skipif(bool(missing), reason=f"Slurm not installed (missing {', '.join(missing)}; "
                       "apt-get install slurm-wlm munge)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="starting slurmctld/slurmd/munged needs root"),
    pytest.mark.root, pytest.mark.mpi, pytest.mark.slow,
]

CONF = """\
ClusterName=fastsample-test
SlurmctldHost={host}
SlurmUser=root
AuthType=auth/munge
# a requeued job waits cred_expire seconds before it starts again (default 120)
AuthInfo=cred_expire=10
# sbatch --wait polls every min(MinJobAge / 2, 32) s once past its first 2 + 8 s (default 300:
# a job that ends at 12 s is seen at 42 s); 16 s keeps a finished job's record long enough
# for the scontrol show job that follows
MinJobAge=16
# the requeued job becomes eligible cred_expire seconds on, with no event to schedule it: the
# backfill pass passes it over ("no jobs to backfill"), and only the main loop's periodic pass
# starts it, every sched_interval s (default 60: the job sat pending up to 50 s); a pass each
# second starts it then. A backfill pass each second for the rest.
SchedulerParameters=bf_interval=1,sched_interval=1
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
# More CPUs than the machine has, so that the partition and training jobs could run side
# by side: only the dependency, not a full node, may keep training from starting early.
SlurmdParameters=config_overrides
NodeName={host} CPUs={cpus} RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _munge_works() -> bool:
    enc = subprocess.run(["munge", "-n"], capture_output=True)
    return enc.returncode == 0 and subprocess.run(["unmunge"], input=enc.stdout, capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    host = socket.gethostname().split(".")[0]
    (d / "slurm.conf").write_text(CONF.format(host=host, d=d, cpus=max(4, os.cpu_count())))
    env = {**os.environ, "SLURM_CONF": str(d / "slurm.conf")}
    started_munge = False
    if not _munge_works():
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            key.parent.mkdir(parents=True, exist_ok=True)
            key.write_bytes(os.urandom(1024))
            shutil.chown(key, "munge", "munge")
            key.chmod(0o400)
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", "munged"], check=True)
        started_munge = True
    daemons = [subprocess.Popen([name, "-D"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for name in ("slurmctld", "slurmd")]
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout
            if "idle" in state:
                break
            time.sleep(0.5)
        else:
            logs = "".join((d / f).read_text() for f in ("slurmctld.log", "slurmd.log") if (d / f).exists())
            pytest.fail(f"the Slurm node never became idle:\n{logs[-3000:]}")
        yield env, d
    finally:
        for p in daemons:
            p.send_signal(signal.SIGTERM)
        for p in daemons:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        pidfile = Path("/run/munge/munged.pid")
        if started_munge and pidfile.exists():
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGTERM)


# jobs/README.md's submission, word for word but for the test's paths and a small job.
SUBMIT = """\
set -euo pipefail
mkdir -p logs
jid=$(FASTSAMPLE_DATASET=$DATASET FASTSAMPLE_OUT=$OUT FASTSAMPLE_PARTS=2 \\
      sbatch --parsable jobs/partition.sbatch)
echo "partition $jid"
tid=$(FASTSAMPLE_DATA=$OUT sbatch --parsable --wait --dependency=afterok:$jid --kill-on-invalid-dep=yes --ntasks=2 \\
    jobs/train.sbatch --fanouts 5,5 --batch-size 64 --hidden 16 --epochs 1 --quiet)
echo "train $tid"
"""


def _job_times(env, job: str) -> dict:
    out = subprocess.run(["scontrol", "show", "job", job], env=env, capture_output=True, text=True).stdout
    return dict(f.split("=", 1) for f in out.split() if f.split("=", 1)[0] in ("StartTime", "EndTime", "JobState"))


@contextlib.contextmanager
def submitted(env, dataset, out):
    """Run SUBMIT from the repository root; yields (process, {kind: job id}, {kind: log file})
    and removes the jobs' logs (and logs/, if it made it) afterwards."""
    had_logs = (REPO / "logs").exists()
    job_env = {**env, "DATASET": str(dataset), "OUT": str(out), "FASTSAMPLE_PYTHON": sys.executable}
    proc = subprocess.run(["bash", "-c", SUBMIT], cwd=REPO, env=job_env, capture_output=True, text=True,
                          timeout=600)
    ids = dict(line.split() for line in proc.stdout.splitlines() if line.split()[:1] in (["partition"], ["train"]))
    logs = {kind: REPO / "logs" / f"fastsample-{kind}-{job}.out" for kind, job in ids.items()}
    try:
        assert set(ids) == {"partition", "train"}, f"{proc.stdout}{proc.stderr}"
        yield proc, ids, logs
    finally:
        for f in logs.values():
            f.unlink(missing_ok=True)
        if not had_logs and (REPO / "logs").exists() and not any((REPO / "logs").iterdir()):
            (REPO / "logs").rmdir()


def test_partition_then_train_chained_as_documented(slurm, tmp_path):
    env, _ = slurm
    write_synthetic(tmp_path / "g", SynthConfig(num_nodes=2000, avg_degree=8, num_classes=4, feature_dim=8,
                                                seed=2), progress=False)
    with submitted(env, tmp_path / "g", tmp_path / "p2") as (proc, ids, logs):
        text = logs["train"].read_text() if logs["train"].exists() else "(no log written)"
        assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}\n{text}"
        part, train = _job_times(env, ids["partition"]), _job_times(env, ids["train"])
        assert part["JobState"] == "COMPLETED" and train["JobState"] == "COMPLETED", (part, train)
        assert part["EndTime"] <= train["StartTime"], f"training started before its partition: {part} {train}"
        assert (tmp_path / "p2" / "partition.json").is_file()
        assert "2 tasks x 1 threads" in text, text
        assert "epoch   0  loss" in text and "val " in text, f"no finished epoch in the job log:\n{text}"


def test_failed_partition_cancels_training(slurm, tmp_path):
    env, _ = slurm
    with submitted(env, tmp_path / "missing", tmp_path / "p2") as (proc, ids, logs):
        assert "missing" in logs["partition"].read_text()
        part, train = _job_times(env, ids["partition"]), _job_times(env, ids["train"])
        assert part["JobState"] == "FAILED" and train["JobState"] == "CANCELLED", (part, train)
        assert not logs["train"].exists(), "the training job must not run"
        queue = subprocess.run(["squeue", "-h", "-o", "%i %T %r"], env=env, capture_output=True, text=True).stdout
        assert queue.strip() == "", f"a job was left in the queue:\n{queue}"


def test_a_preempted_job_requeues_and_finishes_with_the_uninterrupted_losses(slurm, tmp_path):
    # Slurm's --signal pattern: SIGUSR1 to the ranks (here at once, by scancel), they save a
    # mid-epoch checkpoint and exit 75, train.sbatch requeues, the rerun resumes
    import json

    from fastsample.partition import partition_dataset
    from helpers import train_records

    env, _ = slurm
    write_synthetic(tmp_path / "g", SynthConfig(num_nodes=6000, avg_degree=6, num_classes=4, feature_dim=8,
                                                train_frac=0.3, seed=5), progress=False)
    partition_dataset(tmp_path / "g", tmp_path / "p2", 2, progress=False)
    args = ["--fanouts", "4,3", "--batch-size", "40", "--hidden", "16", "--epochs", "25", "--quiet"]
    log, had_logs = tmp_path / "job.jsonl", (REPO / "logs").exists()
    (REPO / "logs").mkdir(exist_ok=True)
    job_env = {**env, "FASTSAMPLE_DATA": str(tmp_path / "p2"), "FASTSAMPLE_PYTHON": sys.executable}
    submit = subprocess.run(["sbatch", "--parsable", "--ntasks=2", "jobs/train.sbatch", *args, "--checkpoint-dir",
                             str(tmp_path / "ck"), "--log-json", str(log)], cwd=REPO, env=job_env,
                            capture_output=True, text=True, check=True)
    job = submit.stdout.strip()
    out = REPO / "logs" / f"fastsample-train-{job}.out"
    try:
        deadline = time.time() + 300
        while (not log.exists() or '"step_losses"' not in log.read_text()) and time.time() < deadline:
            time.sleep(0.05)  # an epoch is done: the signal lands mid-run
        subprocess.run(["scancel", "--signal=USR1", job], env=env, check=True)
        # the uninterrupted run, while the preempted job waits cred_expire s to be requeued
        full = train_records(tmp_path / "p2", 2, tmp_path / "full.jsonl", *args, "--threads", "1")
        while _job_times(env, job).get("JobState") != "COMPLETED" and time.time() < deadline:
            time.sleep(0.5)
        text = out.read_text() if out.exists() else "(no job log)"
        shown = subprocess.run(["scontrol", "show", "job", job], env=env, capture_output=True, text=True).stdout
        assert "JobState=COMPLETED" in shown and "Restarts=1" in shown, f"{shown}\n{text}"
        assert "preempted; requeueing job" in text and "resuming (restart 1)" in text, text
        records = read_records(log)
        steps = lambda rs: [x for r in rs for x in r["step_losses"]]
        assert steps(records) == steps(full), text
    finally:
        subprocess.run(["scancel", job], env=env)
        out.unlink(missing_ok=True)
        if not had_logs:
            shutil.rmtree(REPO / "logs", ignore_errors=True)


def test_a_killed_rank_fails_the_job_at_once_with_one_line(slurm, tmp_path):
    # kill -9 of one rank mid-run (FASTSAMPLE_FAULT, tests only: fastsample/faults.py): srun
    # (--kill-on-bad-exit) ends the other; the job FAILS with the rank's exit status, 137,
    # its log has the supervisor's line naming the rank and phase, and the checkpoint of the
    # last complete epoch is there to resume from (jobs/README.md: exit statuses, RequeueExit)
    from fastsample.partition import partition_dataset

    env, _ = slurm
    write_synthetic(tmp_path / "g", SynthConfig(num_nodes=1500, avg_degree=6, num_classes=4, feature_dim=8,
                                                train_frac=0.2, seed=3), progress=False)
    partition_dataset(tmp_path / "g", tmp_path / "p2", 2, progress=False)
    args = ["--fanouts", "4,3", "--batch-size", "40", "--hidden", "16", "--epochs", "3", "--quiet", "--eval-every", "0"]
    had_logs = (REPO / "logs").exists()
    (REPO / "logs").mkdir(exist_ok=True)
    job_env = {**env, "FASTSAMPLE_DATA": str(tmp_path / "p2"), "FASTSAMPLE_PYTHON": sys.executable,
               "FASTSAMPLE_FAULT": "gather1:1:kill:5", "FASTSAMPLE_FAULT_MARK": str(tmp_path / "fault.time")}
    submit = subprocess.run(["sbatch", "--parsable", "--ntasks=2", "jobs/train.sbatch", *args, "--checkpoint-dir",
                             str(tmp_path / "ck")], cwd=REPO, env=job_env, capture_output=True, text=True, check=True)
    job = submit.stdout.strip()
    out = REPO / "logs" / f"fastsample-train-{job}.out"
    try:
        deadline = time.time() + 300
        while _job_times(env, job).get("JobState") in ("PENDING", "RUNNING", "COMPLETING", None) and \
                time.time() < deadline:
            time.sleep(0.2)
        ended = time.time()
        text = out.read_text() if out.exists() else "(no job log)"
        shown = subprocess.run(["scontrol", "show", "job", job], env=env, capture_output=True, text=True).stdout
        assert "JobState=FAILED" in shown and "ExitCode=137:0" in shown, f"{shown}\n{text}"
        assert ended - float((tmp_path / "fault.time").read_text()) < 30, text
        ours = [line for line in text.splitlines() if line.startswith("python -m fastsample.train: error: ")]
        assert ours == ["python -m fastsample.train: error: rank 1: killed by SIGKILL in gather round 1 (epoch 1, "
                        "step 1) (kill -9, a launcher or scheduler ending it, or the kernel's out-of-memory killer: "
                        "see dmesg)"], text
        assert sorted(f.name for f in (tmp_path / "ck").iterdir() if not f.name.startswith(".")) == ["epoch-0.pt"]
    finally:
        subprocess.run(["scancel", job], env=env)
        out.unlink(missing_ok=True)
        if not had_logs:
            shutil.rmtree(REPO / "logs", ignore_errors=True)
