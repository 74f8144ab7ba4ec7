"""A single-host Slurm cluster for tests: munged, slurmctld and slurmd in the foreground, with a
generated munge key and slurm.conf (one node: this host with its CPUs), every state, spool, log
and socket file in one temporary folder, and free ports, so nothing outside it is touched.

`start(folder)` returns the running cluster, or raises `Unavailable` with the reason (binaries
missing, not root, a daemon that would not start): the caller skips with it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo")
START_S = 30.0


class Unavailable(Exception):
    """Why a local Slurm cannot run here."""


@dataclass
class LocalSlurm:
    """A running cluster: its folder, slurm.conf and the daemons (stopped by stop())."""

    folder: Path
    conf: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """The environment of a Slurm client command (sbatch, squeue, scontrol)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, timeout: float = 30) -> str:
        """A client command's stdout (raises on failure)."""
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, check=True,
                              timeout=timeout).stdout

    def job_state(self, job_id: str) -> str:
        """PENDING, RUNNING, COMPLETED, FAILED, ... (scontrol keeps a finished job a while)."""
        out = self.run("scontrol", "show", "job", job_id)
        return out.split("JobState=", 1)[1].split()[0]

    def stop(self) -> None:
        """Stop the daemons this cluster started (the node's first, then the controller's)."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(folder: Path, node: str, cpus: int, ports: tuple[int, int]) -> str:
    """A one-node slurm.conf: root runs everything, no cgroups, no accounting database."""
    d = folder
    return "\n".join([
        "ClusterName=accelbench-test", f"SlurmctldHost={node}(127.0.0.1)", "SlurmUser=root",
        "SlurmdUser=root", f"SlurmctldPort={ports[0]}", f"SlurmdPort={ports[1]}",
        "AuthType=auth/munge", f"AuthInfo=socket={d}/munge.sock", "CredType=cred/munge",
        f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool",
        f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd.pid",
        f"SlurmctldLogFile={d}/slurmctld.log", f"SlurmdLogFile={d}/slurmd.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "MpiDefault=none",
        "ReturnToService=2", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
        "SwitchType=switch/none", "MinJobAge=600",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN",
        f"PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP", ""])


def _check_can_run() -> None:
    """Raise Unavailable unless the binaries are here and this is root."""
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        raise Unavailable(f"Slurm or munge not installed (missing {', '.join(missing)}; "
                          "Debian: apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        raise Unavailable("a local slurmd must run as root (it starts jobs as their user)")


def _wait_idle(cluster: LocalSlurm) -> None:
    """Until the node is idle; Unavailable with the daemons' log tails otherwise."""
    start = time.monotonic()
    while time.monotonic() - start < START_S:
        dead = [p for p in cluster.procs if p.poll() is not None]
        if dead:
            break
        try:
            if "idle" in cluster.run("sinfo", "-h", "-o", "%T", timeout=10):
                return
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
        time.sleep(0.5)
    logs = " | ".join(f"{f.name}: {f.read_text()[-300:]}"
                      for f in sorted(cluster.folder.glob("*.log")))
    cluster.stop()
    raise Unavailable(f"local Slurm did not come up in {START_S:g} s: {logs}")


def start(folder: Path) -> LocalSlurm:
    """munged, slurmctld and slurmd for one node (this host), all files in `folder`."""
    _check_can_run()
    for sub in ("state", "spool"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    node = socket.gethostname().split(".")[0]
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, node, os.cpu_count() or 1, (_free_port(), _free_port())))
    cluster = LocalSlurm(folder, conf)
    daemons = [
        ["munged", "-F", "--force", f"--socket={folder}/munge.sock", f"--key-file={key}",
         f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
         f"--seed-file={folder}/munged.seed"],
        ["slurmctld", "-D", "-i", "-f", str(conf)],
        ["slurmd", "-D", "-f", str(conf), "-N", node]]
    for argv in daemons:
        log = (folder / f"{argv[0]}.stdout").open("w")
        cluster.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                              env=cluster.env, start_new_session=True))
        if argv[0] == "munged":
            _wait_for_file(folder / "munge.sock")
    _wait_idle(cluster)
    return cluster


def _wait_for_file(path: Path, limit_s: float = 10) -> None:
    """Until path exists (munged made its socket) or limit_s passed."""
    start = time.monotonic()
    while not path.exists() and time.monotonic() - start < limit_s:
        time.sleep(0.1)
