"""The state folder of a reproduction: which graphctx commit made it and which stages are done.

A stage's record (``records/<stage>.json``) is written when the stage has ended well (locally: its command
exited 0; on SLURM: by a job that runs ``afterok`` of the stage's job, so a requeued job is recorded only
once its last run completes). It holds

.. math::
    \\mathrm{input} = \\mathrm{fingerprint}(f_{\\mathrm{stage}},\\ [r_n : n \\in \\mathrm{needs}]),\\qquad
    r = \\mathrm{fingerprint}(\\mathrm{input},\\ \\{o: \\mathrm{sha256}(o)\\})

with :math:`f_{\\mathrm{stage}}` the stage's own fingerprint (its command and settings,
:mod:`graphctx.reproduce.stages`), :math:`r_n` the records of what it read and :math:`o` its outputs (a
folder: every file in it), hashed with :mod:`graphctx.cache`'s :func:`~graphctx.cache.fingerprint` and
:func:`~graphctx.cache.file_digest`. A stage is up to date when its needs are, its record's input equals
the one computed now, and every output still hashes as recorded: so a changed setting, a changed dump or
a rebuilt upstream output reruns it and everything after it, and a deleted or edited output reruns it.
A local run's record also keeps the stage's ``seconds``, from which the next run's progress tells the time
left (:func:`graphctx.reproduce.local.stage_progress`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from graphctx.cache import file_digest, fingerprint, write_json_atomic
from graphctx.errors import ConfigError, DataError
from graphctx.paths import inside
from graphctx.reproduce.stages import Stage

STATE_FILE = "state.json"


class State:
    """The reproduction state kept in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def check_commit(self, commit: str | None) -> None:
        """Refuse a state folder made by another graphctx commit (its records describe other commands)."""
        path = self.folder / STATE_FILE
        if not path.is_file():
            return
        try:
            made = json.loads(path.read_text())["commit"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigError(f"{path}: not a graphctx reproduce state file ({error})") from None
        if made != commit:
            raise ConfigError(
                f"{path}: this reproduce state was made by graphctx commit {made}, this checkout is "
                f"{commit}; use another --state folder (or delete this one to start over)"
            )

    def begin(self, commit: str | None) -> None:
        """Create the folder (with its commit) on the first run that writes."""
        if not (self.folder / STATE_FILE).is_file():
            write_json_atomic(self.folder / STATE_FILE, {"commit": commit})

    def record_path(self, name: str) -> Path:
        return inside(self.folder / "records", f"{name}.json", where=f"stage {name}")

    def plan_path(self, name: str) -> Path:
        return inside(self.folder / "planned", f"{name}.json", where=f"stage {name}")

    def _read(self, path: Path) -> dict[str, Any] | None:
        """A record or plan; None when missing, and when unreadable or not one (a warning line: the stage
        then counts as not done and runs again, which rewrites it)."""
        try:
            found = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            found, reason = None, f"{type(error).__name__}: {error}"
        else:
            reason = "not a graphctx record"
        if isinstance(found, dict) and all(isinstance(found.get(key), str) for key in ("fingerprint",)):
            return found
        print(f"warning: {path}: {reason}; its stage counts as not done", file=sys.stderr)
        return None

    def input_fingerprint(self, own: str, needs: Sequence[str]) -> str | None:
        """The stage's input fingerprint from its needs' records; None while one of them has no record."""
        records = [self._read(self.record_path(need)) for need in needs]
        if any(record is None for record in records):
            return None
        return fingerprint(own, [record["fingerprint"] for record in records])  # type: ignore[index]

    def up_to_date(self, stage: Stage) -> str | None:
        """The stage's recorded fingerprint when it is up to date (its needs must be checked first)."""
        record = self._read(self.record_path(stage.name))
        if record is None or record.get("input") != self.input_fingerprint(stage.fingerprint, stage.needs):
            return None
        if record.get("outputs") != output_digests(stage.outputs, missing_ok=True):
            return None
        return record.get("fingerprint")

    def done_stages(self, stages: Iterable[Stage]) -> dict[str, str]:
        """Each up-to-date stage → its fingerprint (a stage after one not up to date is not)."""
        done: dict[str, str] = {}
        for stage in stages:
            if all(need in done for need in stage.needs):
                found = self.up_to_date(stage)
                if found is not None:
                    done[stage.name] = found
        return done

    def plan(self, stage: Stage) -> None:
        """Write what the stage's record will need (read by :meth:`record`, in a SLURM job too)."""
        write_json_atomic(
            self.plan_path(stage.name),
            {"fingerprint": stage.fingerprint, "needs": list(stage.needs), "outputs": list(stage.outputs)},
        )

    def check_resumable(self, stage: Stage) -> None:
        """Refuse to submit a stage that would resume from an HPC checkpoint of other settings: Lightning
        resumes a SLURM training run from any ``hpc_ckpt_*.ckpt`` in its root, and only one this stage left
        with these very settings (its plan) continues the same run."""
        if stage.resumes_in is None:
            return
        found = sorted(Path(stage.resumes_in).glob("hpc_ckpt_*.ckpt"))
        planned = self._read(self.plan_path(stage.name))
        if found and (planned is None or planned["fingerprint"] != stage.fingerprint):
            raise ConfigError(
                f"{found[0]}: an HPC checkpoint of a training run with other settings (or of another run), "
                f"which the {stage.name} job would resume from; move the hpc_ckpt_*.ckpt files aside"
            )

    def recorded_seconds(self, name: str) -> float | None:
        """The seconds the stage took when it was last recorded here (up to date or not); None when no
        record says (never run here, run under SLURM, or an unreadable record)."""
        try:
            found = json.loads(self.record_path(name).read_text())
        except (OSError, ValueError):
            return None
        seconds = found.get("seconds") if isinstance(found, dict) else None
        return float(seconds) if isinstance(seconds, int | float) and seconds >= 0 else None

    def record(self, name: str, seconds: float | None = None) -> str:
        """Record a stage that ended well (``seconds``: how long it ran, when known); its fingerprint. A
        ``DataError`` when an output is missing."""
        planned = self._read(self.plan_path(name))
        if planned is None:
            raise DataError(f"{self.plan_path(name)}: stage {name} was never planned in this state folder")
        own = self.input_fingerprint(planned["fingerprint"], planned["needs"])
        if own is None:
            raise DataError(f"stage {name}: a stage it needs ({', '.join(planned['needs'])}) has no record")
        outputs = output_digests(planned["outputs"])
        record = {"stage": name, "input": own, "outputs": outputs, "fingerprint": fingerprint(own, outputs)}
        if seconds is not None:
            record["seconds"] = round(seconds, 1)
        write_json_atomic(self.record_path(name), record)
        return record["fingerprint"]


def output_digests(outputs: Iterable[str], missing_ok: bool = False) -> dict[str, Any] | None:
    """SHA-256 of each output file, or of every file under an output folder; a missing output: None with
    ``missing_ok``, else a ``DataError`` naming it."""
    digests: dict[str, Any] = {}
    for output in outputs:
        path = Path(output)
        if path.is_file():
            digests[output] = file_digest(path)
        elif path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            digests[output] = {str(p.relative_to(path)): file_digest(p) for p in files}
        elif missing_ok:
            return None
        else:
            raise DataError(f"{path}: the stage ended without writing this output")
    return digests
