"""A one-node Slurm cluster for the tests: Debian's slurm-wlm and munge (scripts/setup.sh installs them for the
tests), started on this machine as root with a configuration of its own in a temporary folder.

`start_slurm(folder)` writes slurm.conf (this host as the controller and the one compute node, with all its CPUs;
no cgroups, no accounting database; a finished job's record goes to a text file, `jobcomp.log`), starts munged
(with its own key and socket), slurmctld and slurmd, waits until the node is idle, and returns a `Slurm` whose
`env` a client needs (SLURM_CONF, and MUNGE's socket) and whose `stop` ends them all. Every process runs in the
folder's namespace of files: nothing is written to /etc or /var.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.harness import free_port


@dataclass
class Slurm:
    folder: Path
    env: dict[str, str]
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def jobcomp(self) -> Path:
        """One line per finished job (jobcomp/filetxt): JobId=... UserId=... JobName=... JobState=..."""
        return self.folder / "jobcomp.log"

    def finished_jobs(self) -> list[dict[str, str]]:
        if not self.jobcomp.exists():
            return []
        return [
            dict(part.split("=", 1) for part in line.split() if "=" in part)
            for line in self.jobcomp.read_text().splitlines()
            if line.strip()
        ]

    def log(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.folder.glob("*.log"))
            if p.name != "jobcomp.log"
        )

    def stop(self) -> None:
        with_env = os.environ | self.env
        subprocess.run(["scancel", "--user", "root"], env=with_env, capture_output=True)
        for proc in reversed(self.procs):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)


def available() -> str | None:
    """Why a one-node Slurm cannot start here (a missing program, not root), or None."""
    missing = [p for p in ("munged", "slurmctld", "slurmd", "sbatch", "sinfo") if shutil.which(p) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install slurm-wlm munge; scripts/setup.sh test does)"
    if os.geteuid() != 0:
        return "slurmd runs jobs as their users, so the test's one-node Slurm runs as root"
    return None


def start_slurm(folder: Path, timeout_s: float = 60) -> Slurm:
    folder.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    for sub in ("state", "spool", "munge"):
        (folder / sub).mkdir(exist_ok=True)
    os.chmod(folder / "munge", 0o700)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    munge_socket = folder / "munge" / "munge.socket"
    conf = folder / "slurm.conf"
    cpus = os.cpu_count() or 1
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    conf.write_text(f"""\
ClusterName=ttseval-test
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={folder / "state"}
SlurmdSpoolDir={folder / "spool"}
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / "slurmd.pid"}
SlurmctldLogFile={folder / "slurmctld.log"}
SlurmdLogFile={folder / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={folder / "jobcomp.log"}
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
NodeName={host} CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    env = {"SLURM_CONF": str(conf)}
    slurm = Slurm(folder, env)
    run_env = os.environ | env
    try:
        slurm.procs.append(
            subprocess.Popen(
                [
                    "munged",
                    "--foreground",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={munge_socket}",
                    f"--pid-file={folder / 'munge' / 'munged.pid'}",
                    f"--log-file={folder / 'munged.log'}",
                    f"--seed-file={folder / 'munge' / 'munged.seed'}",
                ],
                env=run_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        _wait(lambda: munge_socket.exists(), timeout_s, "munged did not start", slurm)
        for daemon in ("slurmctld", "slurmd"):
            slurm.procs.append(
                subprocess.Popen(
                    [daemon, "-D", "-f", str(conf)],
                    env=run_env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

        def idle() -> bool:
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=run_env, capture_output=True, text=True)
            return out.returncode == 0 and out.stdout.strip() in ("idle", "mix", "alloc")

        _wait(idle, timeout_s, "the Slurm node did not become idle", slurm)
    except BaseException:
        slurm.stop()
        raise
    return slurm


def _wait(ready, timeout_s: float, message: str, slurm: Slurm) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{message} within {timeout_s:.0f} s:\n{slurm.log()}")
        time.sleep(0.5)
