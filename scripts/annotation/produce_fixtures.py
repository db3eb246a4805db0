"""Produce tests/data/annotation/{doccano,label-studio}/: ratings exported by the real annotation tools
(with ``--task ais``: tests/data/annotation/ais/{doccano,label-studio}/, AIS judgments).

What it does, end to end:

1. ``graphctx annotate export`` on tests/data/annotation/predictions/ (site cardano, variants GraphGen and
   TextGen, 4 questions, annotators ann1 ann2 ann3, seed 0) into a temporary folder.
2. Doccano (``doccano init``, ``doccano createuser`` for admin and each annotator, ``doccano webserver`` and
   ``doccano task``): per annotator, a text-classification project (single label) is created through the
   REST API, the labels are uploaded from the export's doccano/labels.json, the annotator's JSONL is
   uploaded (filepond + /upload), the annotator joins as "annotator", logs in and rates each example with
   the rating of ratings_plan.json, and the admin exports the project as JSONL: the zip Doccano returns is
   saved as doccano/<annotator>.zip.
3. Label Studio (``label-studio start`` with an admin user and API token, legacy tokens enabled): per
   annotator, a project with the export's labeling_config.xml, the annotator's tasks imported, one
   annotation per task with its rating, and the JSON export saved as label-studio/<annotator>.json.

The tools are installed in their own virtual environments (they pin conflicting packages), e.g.::

    python3 -m venv /tmp/doccano-venv && /tmp/doccano-venv/bin/pip install doccano "marshmallow<4" "numpy<2"
    python3 -m venv /tmp/ls-venv && /tmp/ls-venv/bin/pip install label-studio
    python scripts/annotation/produce_fixtures.py \
        --doccano-venv /tmp/doccano-venv --label-studio-venv /tmp/ls-venv

(doccano 1.8.4 needs ``marshmallow<4``, as its environs reads ``marshmallow.__version_info__``, gone in 4.0,
and ``numpy<2``, as its pandas 1.5.3 is built against numpy 1.)
With ``--task ais`` the same steps run on tests/data/annotation/ais/predictions/ (prediction lines with
their attributions) exported with ``--task ais``, judged as ais/judgments_plan.json says: in Doccano one
label per example, in Label Studio the first question's choice and, when the answer is understood, the
second's.
Run from the repository root with graphctx's own environment active. Only the standard library is used here.
A rerun gives the same files up to the tools' timestamps and ids (zip dates, Label Studio's ``created_at``,
``unique_id``): the items, their order and the ratings are the same.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "annotation"
AIS_LABELS = {
    "y": "Yes, fully attributable.",
    "n": "No, not fully attributable.",
    "u": "No, the response is unclear.",
}
"""The AIS plan's codes as the labels of the AIS form (graphctx/evaluation/annotation/ais_form.py)."""
ANNOTATORS = ("ann1", "ann2", "ann3")
PASSWORD = "fixtures-only-password"


def export(out: Path, task: str) -> Path:
    """Step 1: the annotation set the tools rate."""
    folder = DATA / "ais" if task == "ais" else DATA
    command = [
        sys.executable,
        "-m",
        "graphctx.cli",
        "annotate",
        "export",
        "--task",
        task,
        "--predictions-dir",
    ]
    command += [str(folder / "predictions"), "--site", "cardano", "--variants", "GraphGen", "TextGen"]
    command += ["--questions", "4", "--annotators", *ANNOTATORS, "--seed", "0", "--out", str(out)]
    subprocess.run(command, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return out


def planned_ratings(key: dict[str, Any]) -> dict[str, dict[str, str]]:
    """annotator -> item id -> the rating ratings_plan.json gives it ("1".."5"), or, for an AIS export, the
    judgment code of ais/judgments_plan.json (y, n, u)."""
    questions = sorted({entry["question_id"] for entry in key["items"].values()})
    if key.get("task") == "ais":
        plan = json.loads((DATA / "ais" / "judgments_plan.json").read_text())["judgments"]
        system = {
            item: f"{e['source']}/{e['attribution']['architecture']}" for item, e in key["items"].items()
        }
    else:
        plan = json.loads((DATA / "ratings_plan.json").read_text())["ratings"]
        system = {item: entry["source"] for item, entry in key["items"].items()}
    return {
        annotator: {
            item: str(plan[annotator][system[item]][questions.index(entry["question_id"])])
            for item, entry in key["items"].items()
        }
        for annotator in ANNOTATORS
    }


def doccano_label(code: str) -> str:
    """The Doccano label of a planned rating or AIS judgment."""
    return AIS_LABELS.get(code, code)


def label_studio_result(code: str) -> list[dict[str, Any]]:
    """The Label Studio result of a planned rating, or of an AIS judgment (two stages, the second only when
    the answer is understood)."""
    if code not in AIS_LABELS:
        return [{"from_name": "rating", "to_name": "answer", "type": "choices", "value": {"choices": [code]}}]
    understood = "No, the response is unclear." if code == "u" else "Yes, I understand it."
    result = [
        {
            "from_name": "interpretable",
            "to_name": "answer",
            "type": "choices",
            "value": {"choices": [understood]},
        }
    ]
    if code != "u":
        choice = {"from_name": "attributable", "to_name": "passage", "type": "choices"}
        result.append({**choice, "value": {"choices": [AIS_LABELS[code]]}})
    return result


class Http:
    """A JSON client of one server with an ``Authorization`` header."""

    def __init__(self, base: str, auth: str | None = None) -> None:
        self.base, self.auth = base, auth

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        files: dict[str, Path] | None = None,
        raw: bool = False,
    ) -> Any:
        """The answer to ``method path`` (JSON ``body`` or multipart ``files``): parsed JSON, else bytes (or
        bytes always, with ``raw``)."""
        headers = {"Authorization": self.auth} if self.auth else {}
        data = None
        if files:
            boundary = uuid.uuid4().hex
            data = multipart(boundary, files)
            headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
        elif body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = response.read()
        if response.headers.get_content_type() == "application/json" and not raw:
            return json.loads(answer) if answer else None
        return answer


def multipart(boundary: str, files: dict[str, Path]) -> bytes:
    parts = []
    for field, path in files.items():
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{path.name}"\r\n'
        parts.append(
            head.encode() + b"Content-Type: application/octet-stream\r\n\r\n" + path.read_bytes() + b"\r\n"
        )
    return b"".join(parts) + f"--{boundary}--\r\n".encode()


def wait_for(url: str, process: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=5)
            return
        except urllib.error.HTTPError:
            return  # the server answers
        except OSError:
            time.sleep(2)
    raise RuntimeError(f"{url}: no answer after {seconds} s")


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    handle = open(log, "w")  # noqa: SIM115 - kept open for the server's life
    return subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        os.killpg(process.pid, 15)
    for process in processes:
        process.wait(timeout=60)


def doccano_task(api: Http, task_id: str) -> None:
    for _ in range(120):
        status = api.call("GET", f"/v1/tasks/status/{task_id}")
        if status["ready"]:
            if status.get("error"):
                raise RuntimeError(f"doccano task {task_id}: {status['error']}")
            return
        time.sleep(1)
    raise RuntimeError(f"doccano task {task_id} not done")


def doccano_login(base: str, username: str) -> Http:
    token = Http(base).call("POST", "/v1/auth/login/", {"username": username, "password": PASSWORD})["key"]
    return Http(base, f"Token {token}")


def doccano_project(base: str, exported: Path, annotator: str, ratings: dict[str, str]) -> bytes:
    """One annotator's Doccano project, rated; returns the export zip."""
    admin = doccano_login(base, "admin")
    guideline = "Rate how helpful the answer is: 1 unhelpful or misleading, 5 exemplary."
    if set(ratings.values()) <= set(AIS_LABELS):
        guideline = "Answer the two questions under each example: one label answers both."
    project = admin.call(
        "POST",
        "/v1/projects",
        {
            "name": f"cardano-{annotator}",
            "description": "graphctx human evaluation",
            "guideline": guideline,
            "project_type": "DocumentClassification",
            "resourcetype": "TextClassificationProject",
            "single_class_classification": True,
            "random_order": False,
            "collaborative_annotation": False,
        },
    )["id"]
    admin.call(
        "POST",
        f"/v1/projects/{project}/category-type-upload",
        files={"file": exported / "doccano/labels.json"},
    )
    upload = admin.call(
        "POST", "/v1/fp/process/", files={"filepond": exported / f"doccano/{annotator}.jsonl"}
    )
    body = {"uploadIds": [upload.decode()], "format": "JSONL", "task": "DocumentClassification"}
    body |= {"column_data": "text", "column_label": "label", "delimiter": "", "encoding": "utf_8"}
    doccano_task(admin, admin.call("POST", f"/v1/projects/{project}/upload", body)["task_id"])
    role = next(r["id"] for r in admin.call("GET", "/v1/roles") if r["name"] == "annotator")
    user = next(u["id"] for u in admin.call("GET", f"/v1/users?q={annotator}") if u["username"] == annotator)
    admin.call("POST", f"/v1/projects/{project}/members", {"user": user, "role": role})
    rater = doccano_login(base, annotator)
    labels = {
        label["text"]: label["id"] for label in rater.call("GET", f"/v1/projects/{project}/category-types")
    }
    examples = rater.call("GET", f"/v1/projects/{project}/examples?limit=1000")["results"]
    for example in examples:
        rating = doccano_label(ratings[example["meta"]["item"]])
        rater.call(
            "POST", f"/v1/projects/{project}/examples/{example['id']}/categories", {"label": labels[rating]}
        )
    task = admin.call(
        "POST", f"/v1/projects/{project}/download", {"format": "JSONL", "exportApproved": False}
    )
    doccano_task(admin, task["task_id"])
    return admin.call("GET", f"/v1/projects/{project}/download?taskId={task['task_id']}", raw=True)


def run_doccano(
    venv: Path, exported: Path, ratings: dict[str, dict[str, str]], work: Path, out: Path
) -> None:
    """Step 2."""
    env = {**os.environ, "DOCCANO_HOME": str(work / "doccano")}
    doccano = str(venv / "bin" / "doccano")
    subprocess.run([doccano, "init"], env=env, check=True, capture_output=True)
    for username in ("admin", *ANNOTATORS):
        subprocess.run(
            [doccano, "createuser", "--username", username, "--password", PASSWORD], env=env, check=True
        )
    servers = [
        start([doccano, "webserver", "--port", "8765", "--workers", "1"], env, work / "doccano-web.log"),
        start([doccano, "task", "--concurrency", "1"], env, work / "doccano-task.log"),
    ]
    try:
        wait_for("http://127.0.0.1:8765/v1/health/", servers[0])
        (out / "doccano").mkdir(exist_ok=True)
        for annotator in ANNOTATORS:
            zipped = doccano_project("http://127.0.0.1:8765", exported, annotator, ratings[annotator])
            (out / "doccano" / f"{annotator}.zip").write_bytes(zipped)
    finally:
        stop(servers)


def label_studio_project(api: Http, exported: Path, annotator: str, ratings: dict[str, str]) -> bytes:
    """One annotator's Label Studio project, rated; returns its JSON export."""
    config = (exported / "label-studio/labeling_config.xml").read_text()
    project = api.call("POST", "/api/projects", {"title": f"cardano-{annotator}", "label_config": config})[
        "id"
    ]
    tasks = json.loads((exported / f"label-studio/{annotator}.json").read_text())
    api.call("POST", f"/api/projects/{project}/import", tasks)
    listed = api.call("GET", f"/api/tasks?project={project}&page_size=1000")
    for task in listed["tasks"] if isinstance(listed, dict) else listed:
        result = label_studio_result(ratings[task["data"]["item"]])
        api.call("POST", f"/api/tasks/{task['id']}/annotations", {"result": result})
    return api.call("GET", f"/api/projects/{project}/export?exportType=JSON", raw=True)


def run_label_studio(
    venv: Path, exported: Path, ratings: dict[str, dict[str, str]], work: Path, out: Path
) -> None:
    """Step 3."""
    token = uuid.uuid4().hex
    # --user-token is a legacy token, which Label Studio 1.20+ accepts only when enabled at the first start
    env = {**os.environ, "LABEL_STUDIO_BASE_DATA_DIR": str(work / "label-studio")}
    env["LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN"] = "true"
    command = [str(venv / "bin" / "label-studio"), "start", "--no-browser", "--port", "8766", "--host", ""]
    command += ["--data-dir", str(work / "label-studio"), "--username", "admin@example.com"]
    command += ["--password", PASSWORD, "--user-token", token]
    server = start(command, env, work / "label-studio.log")
    try:
        wait_for("http://127.0.0.1:8766/health", server)
        api = Http("http://127.0.0.1:8766", f"Token {token}")
        (out / "label-studio").mkdir(exist_ok=True)
        for annotator in ANNOTATORS:
            exported_json = label_studio_project(api, exported, annotator, ratings[annotator])
            (out / "label-studio" / f"{annotator}.json").write_bytes(
                exported_json
            )  # as Label Studio wrote it
    finally:
        stop([server])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--doccano-venv", type=Path, help="virtual environment with doccano installed")
    parser.add_argument(
        "--label-studio-venv", type=Path, help="virtual environment with label-studio installed"
    )
    parser.add_argument("--task", choices=("helpfulness", "ais"), default="helpfulness", help="what is rated")
    args = parser.parse_args()
    out = DATA / "ais" if args.task == "ais" else DATA
    work = Path(tempfile.mkdtemp(prefix="graphctx-annotation-"))
    try:
        exported = export(work / "export", args.task)
        ratings = planned_ratings(json.loads((exported / "key.json").read_text()))
        if args.doccano_venv:
            run_doccano(args.doccano_venv, exported, ratings, work, out)
        if args.label_studio_venv:
            run_label_studio(args.label_studio_venv, exported, ratings, work, out)
    except Exception:
        print(f"failed; the servers' logs are in {work}", file=sys.stderr)
        raise
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
