"""The suite's own scheduling: tests that share one machine-wide fixture run on one xdist worker.

``--dist loadgroup`` reads a test's ``xdist_group`` into its node id (``…::test@slurm``) while collecting; if
the group is added too late, or a pytest release stops reading the renamed id (pytest 9.2 keeps node ids in
``Node._id``, and xdist 3.8 still writes ``Node._nodeid``), every test is its own group: the SLURM cluster
starts once per worker and the local protocol run is repeated, and nothing says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

PROBE = r"""
import os
import pytest

@pytest.fixture(scope="session")
def local_run():
    with open(os.environ["PROBE_STARTS"], "a") as starts:  # one line per start of the fixture
        starts.write(os.environ["PYTEST_XDIST_WORKER"] + "\n")

@pytest.mark.parametrize("n", range(6))
def test_grouped(local_run, request, n):
    assert request.node.nodeid.endswith("@slurm"), request.node.nodeid
"""


def test_tests_of_one_single_machine_fixture_share_one_worker(tmp_path: Path) -> None:
    for name in ("conftest.py", "slurm_cluster.py"):
        shutil.copy(REPO_ROOT / "tests" / name, tmp_path / name)
    (tmp_path / "test_probe.py").write_text(PROBE)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    command += ["-q", "-c", "/dev/null", "--rootdir", str(tmp_path), str(tmp_path)]
    starts = tmp_path / "starts.txt"
    env = {**os.environ, "PROBE_STARTS": str(starts)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    assert len(starts.read_text().split()) == 1  # the fixture started once, on one worker


def test_every_module_of_this_run_shares_one_slurm_cluster(request: pytest.FixtureRequest) -> None:
    """A session fixture imported into each test module is a fixture of each module, started once per
    module (four clusters a run): it lives in conftest.py, one definition for every test."""
    definitions = {
        id(item._fixtureinfo.name2fixturedefs["slurm_cluster"][-1])
        for item in request.session.items
        if "slurm_cluster" in getattr(item, "fixturenames", ())
    }
    if not definitions:
        pytest.skip("no test of this run uses the SLURM cluster")
    assert len(definitions) == 1
