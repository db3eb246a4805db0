"""A real single-node SLURM cluster for the tests: ``scripts/slurm/cluster.sh`` on free localhost ports.

Needs root and either SLURM + munge installed or ``apt-get`` to install them (CI runs as root); elsewhere the
tests that use it are skipped with the reason. Under ``CI=true`` they fail instead: CI must run them.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CLUSTER_SH = REPO_ROOT / "scripts" / "slurm" / "cluster.sh"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _unavailable(reason: str) -> None:
    """Skip, or under ``CI=true`` (set by CI services and ``.ci/run``) fail: there the cluster must run."""
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI=true but the SLURM cluster cannot run: {reason}")
    pytest.skip(reason)


def _missing_requirement() -> str | None:
    """Why a cluster cannot be started here, or None."""
    if os.geteuid() != 0:
        return "starting slurmctld/slurmd/munged needs root"
    if shutil.which("slurmctld") and shutil.which("munged"):
        return None
    if not shutil.which("apt-get"):
        return "SLURM is not installed and there is no apt-get to install slurm-wlm and munge"
    return None


class SlurmCluster:
    """Client side of a running cluster: ``SLURM_CONF`` in ``env`` and a few scontrol helpers."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = env

    def run(self, *command: str) -> str:
        """Run a SLURM client command from the repository root (the job's SLURM_SUBMIT_DIR)."""
        done = subprocess.run(command, env=self.env, cwd=REPO_ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr}")
        return done.stdout

    def job_field(self, job_id: str, field: str) -> str:
        """One ``Field=value`` of ``scontrol show job`` (e.g. JobState, Restarts)."""
        shown = self.run("scontrol", "show", "job", job_id)
        found = re.search(rf"\b{field}=(\S*)", shown)
        return found.group(1) if found else ""

    def log_tails(self, chars: int = 3000) -> str:
        """The end of each daemon log of the cluster, for a failure message."""
        return "\n".join(
            f"--- {p.name}:\n{p.read_text()[-chars:]}" for p in sorted(self.folder.glob("*.log"))
        )

    def release(self, job_id: str) -> None:
        """Start a requeued job now (SLURM holds one for about two minutes, as an admin could release it).
        The requeue revokes the old run's job credential with a one-second time stamp, and a credential made
        within that second is refused ("Killing non-startable batch job: Job credential revoked"), so the
        release waits into a later whole second first."""
        time.sleep(2.0 - time.time() % 1.0)
        self.run("scontrol", "update", f"JobId={job_id}", "StartTime=now")

    def wait_for(self, job_id: str, predicate, timeout_s: float, what: str) -> None:
        """Poll ``scontrol show job`` until ``predicate(self, job_id)`` holds; a failure carries the daemon
        logs (a job that vanishes from the controller is otherwise unexplained)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if predicate(self, job_id):
                    return
            except AssertionError as error:
                raise AssertionError(f"{error}\nwhile waiting for {what}\n{self.log_tails()}") from error
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"job {job_id}: timed out waiting for {what}: "
                    + self.run("scontrol", "show", "job", job_id)
                )
            time.sleep(1)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """Install (once) and start munged + slurmctld + slurmd with JobRequeue=1; stop them afterwards."""
    reason = _missing_requirement()
    if reason:
        _unavailable(reason)
    folder = tmp_path_factory.mktemp("slurm")
    env = {
        **os.environ,
        "GRAPHCTX_SLURM_DIR": str(folder),
        "GRAPHCTX_SLURMCTLD_PORT": str(_free_port()),
        "GRAPHCTX_SLURMD_PORT": str(_free_port()),
        "SLURM_CONF": str(folder / "slurm.conf"),
    }
    installed = subprocess.run([str(CLUSTER_SH), "install"], env=env, capture_output=True, text=True)
    if installed.returncode != 0:
        _unavailable(f"could not install slurm-wlm and munge: {installed.stderr[-500:]}")
    started = subprocess.run([str(CLUSTER_SH), "start"], env=env, capture_output=True, text=True)
    if started.returncode != 0:
        logs = "\n".join(f"{p.name}: {p.read_text()[-2000:]}" for p in folder.glob("*.log"))
        subprocess.run([str(CLUSTER_SH), "stop"], env=env)
        pytest.fail(f"cluster.sh start failed: {started.stderr}\n{logs}")
    try:
        yield SlurmCluster(folder, env)
    finally:
        subprocess.run([str(CLUSTER_SH), "stop"], env=env, capture_output=True)
