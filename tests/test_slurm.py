"""jobs/train.sbatch on a real single-node Slurm (slurmctld + slurmd + munge, this machine)."""

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
from fastsample.partition import partition_dataset

DAEMONS = ("slurmctld", "slurmd", "munged", "sbatch", "sinfo", "runuser")

missing = [d for d in DAEMONS if shutil.which(d) is None]
pytestmark = [
    pytest.mark.skipif(bool(missing), reason=f"Slurm not installed (missing {', '.join(missing)}; "
                       "apt-get install slurm-wlm munge)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="starting slurmctld/slurmd/munged needs root"),
]

CONF = """\
ClusterName=fastsample-test
SlurmctldHost={host}
SlurmUser=root
AuthType=auth/munge
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
    (d / "slurm.conf").write_text(CONF.format(host=host, d=d, cpus=os.cpu_count()))
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


def test_train_sbatch_runs_two_tasks_to_a_finished_epoch(slurm, tmp_path):
    env, _ = slurm
    write_synthetic(tmp_path / "g", SynthConfig(num_nodes=2000, avg_degree=8, num_classes=4, feature_dim=8,
                                                seed=2), progress=False)
    partition_dataset(tmp_path / "g", tmp_path / "p2", 2, progress=False)
    (tmp_path / "logs").mkdir()
    job_env = {**env, "FASTSAMPLE_DATA": str(tmp_path / "p2"), "FASTSAMPLE_PYTHON": sys.executable}
    proc = subprocess.run(["sbatch", "--wait", "--parsable", "--ntasks=2", f"--chdir={tmp_path}",
                           str(REPO / "jobs" / "train.sbatch"), "--fanouts", "5,5", "--batch-size", "64",
                           "--hidden", "16", "--epochs", "1", "--quiet"],
                          env=job_env, capture_output=True, text=True, timeout=600)
    logs = list((tmp_path / "logs").glob("fastsample-train-*.out"))
    text = logs[0].read_text() if logs else "(no log written)"
    assert proc.returncode == 0, f"sbatch: {proc.stdout}{proc.stderr}\n{text}"
    assert "2 tasks x 1 threads" in text, text
    assert "epoch   0  loss" in text and "val " in text, f"no finished epoch in the job log:\n{text}"
