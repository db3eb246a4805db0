"""``graphctx reproduce``: the whole protocol end to end on the tiny config, locally; what a rerun skips and
reruns; the lock; the dry-run's cost against ``graphctx plan --cost``; bad input, one line, nothing written.

The SLURM run is in tests/test_reproduce_slurm.py.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from reproduce_workspace import (
    REPO_ROOT,
    LocalRun,
    environment,
    reproduce,
    reproduce_config,
)

from graphctx.cli import main
from graphctx.folder_lock import FolderLock
from graphctx.reproduce.state import STATE_FILE

STAGES = ["data", "index", "train", "evaluate", "human"]


@pytest.fixture
def workspace(
    tmp_path: Path,
    cardano_dir: Path,
    tiny_bert: Path,
    reproduce_cache: Path,
) -> tuple[Path, Path]:
    """(config, state folder)."""
    return reproduce_config(tmp_path, cardano_dir, tiny_bert, reproduce_cache), tmp_path / "state"


def lines(text: str, word: str) -> list[str]:
    """The stage names of the ``word <stage>...`` lines of reproduce's output."""
    return [line.split()[1].rstrip(":") for line in text.splitlines() if line.startswith(f"{word} ")]


def test_the_protocol_runs_end_to_end_then_skips_what_is_up_to_date(local_run: LocalRun) -> None:
    config, state = local_run.config, local_run.state
    every = [f"cardano/{stage}" for stage in STAGES] + ["tables"]
    assert lines(local_run.stdout, "done") == every, local_run.stdout
    root = config.parent / "run"
    assert (root / "adapter" / "adapter_model.safetensors").is_file()
    results = (root / "eval" / "results.csv").read_text()
    assert "GraphContextGen" in results
    summary = json.loads((state / "cardano" / "data.txt").read_text().splitlines()[-1])
    assert summary["kept"] > 0 and json.loads((state / "cardano" / "index.json").read_text())["pool"] > 0
    key = json.loads((state / "cardano" / "human" / "key.json").read_text())
    assert len(key["items"]) == 2 * 2  # 2 questions × (GraphContextGen + gold)
    assert 'No "Beside the paper" section' in (state / "beside_the_paper.md").read_text()  # cardano

    again = reproduce("--config", str(config), "--state", str(state), "--human-questions", "2")
    assert again.returncode == 0, again.stderr[-3000:]
    assert lines(again.stdout, "skip") == every and not lines(again.stdout, "run"), again.stdout
    *skipped, last = again.stdout.splitlines()
    for line in skipped:
        assert re.fullmatch(r"skip \S+: up to date \([0-9a-f]{20}\)", line), line
    assert last.startswith("wrote: ") and last.endswith("beside_the_paper.md"), last  # what the run made

    # A stage that fails (an annotator named twice) stops the run, naming it; the next run retries it
    twice = ("--annotators", "alice", "alice")
    failed = reproduce("--config", str(config), "--state", str(state), "--human-questions", "2", *twice)
    assert failed.returncode == 1 and lines(failed.stdout, "run") == ["cardano/human"], failed.stdout
    assert (
        failed.stderr.strip().splitlines()[-1].startswith("error: stage cardano/human failed (exit status 1)")
    )
    assert not lines(failed.stdout, "done")

    # An input changed (the human export's question count, in its command) and an output is gone (the
    # tables): those two stages rerun, nothing else.
    (state / "beside_the_paper.md").unlink()
    changed = reproduce("--config", str(config), "--state", str(state), "--human-questions", "1")
    assert changed.returncode == 0, changed.stderr[-3000:]
    assert lines(changed.stdout, "run") == ["cardano/human", "tables"], changed.stdout
    assert len(lines(changed.stdout, "skip")) == len(every) - 2
    assert len(json.loads((state / "cardano" / "human" / "key.json").read_text())["items"]) == 2


def test_a_second_invocation_while_one_runs_is_refused_in_one_line(workspace: tuple[Path, Path]) -> None:
    config, state = workspace
    running = FolderLock(state, "another graphctx reproduce")
    assert running.acquire()  # as the first invocation holds it for its whole run
    try:
        second = reproduce("--config", str(config), "--state", str(state))
    finally:
        running.release()
    assert second.returncode == 1
    error = second.stderr.strip().splitlines()
    assert len(error) == 1 and "is already using this folder" in error[0], second.stderr
    assert not (state / STATE_FILE).exists() and not (state / "records").exists()


def test_dry_run_prints_the_graph_with_plan_cost_s_figures_and_writes_nothing(
    workspace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, state = workspace
    counts = ["--counts", "train=351,test=45"]
    assert main(["plan", "--config", str(config), "--cost", "--json", *counts]) == 0
    cost = json.loads(capsys.readouterr().out)["cost"]
    assert main(["reproduce", "--config", str(config), "--state", str(state), "--dry-run", *counts]) == 0
    printed = capsys.readouterr().out
    blocks = {block.split("\n", 1)[0]: block for block in printed.split("\ncardano/")[1:]}
    for stage, key in (("train", "train"), ("evaluate", "answers")):
        figures = cost["stages"][key]
        assert (
            f"cost       {figures['gpu_hours']:.4g} GPU-h, {figures['peak_gib']} GiB per rank"
            in blocks[stage]
        )
    assert f"total: {cost['gpu_hours']:.4g} GPU-h" in printed
    assert "needs      cardano/index, cardano/train" in blocks["evaluate"]
    assert "[scripts/slurm/train.sbatch]" in blocks["train"]
    assert not state.exists()


def _config_with(path: Path, change) -> Path:
    settings = yaml.safe_load(path.read_text())
    change(settings)
    changed = path.with_name(f"changed-{len(list(path.parent.glob('changed-*')))}.yaml")
    changed.write_text(yaml.safe_dump(settings))
    return changed


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_bad_input_is_one_line_and_nothing_is_written(
    workspace: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config, state = workspace
    run = ["reproduce", "--state", str(state)]

    def set_source(s):
        s["data"]["dataset"]["source"] = str(tmp_path / "askubuntu")

    missing = _config_with(config, set_source)
    assert str(tmp_path / "askubuntu") in _error(capsys, [*run, "--config", str(missing)])

    assert "--sites unix: no --config is for this site" in _error(
        capsys, [*run, "--config", str(config), "--sites", "unix"]
    )

    def other_site_other_model(s):
        s["data"]["dataset"]["site"] = "other"
        s["model"]["spec"]["source"] = "smollm2-gguf"

    other = _config_with(config, other_site_other_model)
    error = _error(capsys, [*run, "--config", str(config), "--config", str(other)])
    assert f"{other}: model.spec.source smollm2-gguf differs" in error

    def adapter_elsewhere(s):
        s["evaluation"]["adapter"] = str(tmp_path / "some-adapter")

    elsewhere = _config_with(config, adapter_elsewhere)
    assert "evaluation.adapter" in _error(capsys, [*run, "--config", str(elsewhere)])

    for site in (str(tmp_path / "outside"), "../../outside"):  # the site names folders of --state

        def hostile_site(s, site=site):
            s["data"]["dataset"]["site"] = site

        hostile = _config_with(config, hostile_site)
        assert f"data.dataset.site: {site!r} is not a site's name" in _error(
            capsys, [*run, "--config", str(hostile)]
        )
    assert not (tmp_path / "outside").exists() and not (tmp_path.parent / "outside").exists()

    assert not state.exists()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert "run graphctx reproduce from the repository root" in _error(
        capsys, [*run, "--config", str(config)]
    )
    monkeypatch.chdir(REPO_ROOT)
    assert not state.exists() and sorted(p.name for p in elsewhere.iterdir()) == []

    state.mkdir()
    (state / STATE_FILE).write_text(json.dumps({"commit": "0" * 40}))
    assert "made by graphctx commit 0000000000" in _error(capsys, [*run, "--config", str(config)])
    assert sorted(p.name for p in state.iterdir()) == [STATE_FILE]


def test_slurm_without_sbatch_on_path_is_refused(workspace: tuple[Path, Path], tmp_path: Path) -> None:
    import sys

    config, state = workspace
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    done = reproduce(
        "--config", str(config), "--state", str(state), "--slurm", env=environment(PATH=str(bare))
    )
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        "error: --slurm: sbatch/squeue are not on PATH; run on a SLURM login node, or leave out --slurm"
    ], done.stderr
    assert not state.exists()


def test_a_state_file_a_shared_training_folder_and_corrupt_state_files_are_one_line(
    workspace: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from graphctx.errors import ConfigError
    from graphctx.reproduce.slurm import json_ids
    from graphctx.reproduce.state import State

    config, state = workspace
    a_file = tmp_path / "state-file"
    a_file.write_text("x\n")
    error = _error(capsys, ["reproduce", "--state", str(a_file), "--config", str(config)])
    assert error == f"error: --state {a_file}: not a folder; name a folder (made if missing)"

    def other_site_same_root(s):
        s["data"]["dataset"]["site"] = "other"

    other = _config_with(config, other_site_same_root)
    error = _error(
        capsys, ["reproduce", "--state", str(state), "--config", str(config), "--config", str(other)]
    )
    assert f"{other}: trainer.default_root_dir " in error and "is also the training folder of site" in error
    assert not state.exists()

    state.mkdir()
    jobs = state / "jobs.json"
    for text in ("{not json", "[1, 2]", '{"a": [1]}'):
        jobs.write_text(text)
        with pytest.raises(ConfigError, match=r"jobs.json: not the job list graphctx reproduce writes \("):
            json_ids(jobs)
    records = state / "records"
    records.mkdir()
    for text in ("[]", '{"fingerprint": 3}', "{trunc"):
        (records / "cardano" / "data.json").parent.mkdir(exist_ok=True)
        (records / "cardano" / "data.json").write_text(text)
        assert State(state).input_fingerprint("own", ["cardano/data"]) is None  # the stage runs again
        warning = capsys.readouterr().err.strip().splitlines()
        assert len(warning) == 1 and warning[0].startswith(f"warning: {records / 'cardano' / 'data.json'}: ")


def test_a_stopped_reproduce_ends_its_stage_and_leaves_no_temporary_file(
    workspace: tuple[Path, Path],
) -> None:
    """SIGTERM while the index stage runs (its stdout going to a temporary index.json): one line, the
    stage's processes ended, the temporary removed, nothing recorded."""
    import signal
    import subprocess
    import sys
    import time

    import psutil
    from reproduce_workspace import environment

    config, state = workspace
    argv = [sys.executable, "-m", "graphctx.cli", "reproduce", "--config", str(config), "--state", str(state)]
    argv += ["--stages", "index"]
    process = subprocess.Popen(
        argv, cwd=REPO_ROOT, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("run cardano/index"):
                break
        deadline = time.monotonic() + 60
        while not list(state.glob("cardano/.index.json.*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.05)
        children = psutil.Process(process.pid).children(recursive=True)
        assert children and list(state.glob("cardano/.index.json.*.tmp"))
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 1
    # the stage's own lines (its "wrote:" cache notes) share the stream and may land after reproduce's
    own = [line for line in err.strip().splitlines() if not line.startswith("wrote: ")]
    assert own[-1] == (
        "error: stopped by SIGTERM: the running stage's processes were ended and its partial output removed, "
        "nothing of it recorded; rerun graphctx reproduce to continue from it"
    )
    assert not any(child.is_running() and child.status() != psutil.STATUS_ZOMBIE for child in children)
    assert not list(state.rglob("*.tmp")) and not (state / "records" / "cardano" / "index.json").exists()


def test_editing_a_module_a_plugin_imports_reruns_evaluate_only(
    workspace: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_extending import _plugin_package

    from graphctx.reproduce.sites import load_sites
    from graphctx.reproduce.stages import Options, build_stages

    config, state = workspace
    package = _plugin_package(tmp_path / "plugins")
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    for name in [name for name in sys.modules if name == "helpful" or name.startswith("helpful.")]:
        monkeypatch.delitem(sys.modules, name)  # another test's helpful package, imported from its own folder

    def with_plugin(s):
        s["evaluation"]["metrics"]["extra"] = [{"class_path": "helpful.metric.Words"}]

    sites = load_sites([str(_config_with(config, with_plugin))], None)
    options = Options(state=state, digest_sources=False)
    before = {stage.name: stage.fingerprint for stage in build_stages(sites, options)}
    (package / "words.py").write_text("def count(text):\n    return len(text)\n")
    after = {stage.name: stage.fingerprint for stage in build_stages(sites, options)}
    assert [name for name in before if before[name] != after[name]] == ["cardano/evaluate"]
