"""Export an evaluation run folder as a Hugging Face dataset (Parquet + dataset card), optionally pushed.

One row per (site, question): each variant's prompt, fitted context, answer, retrieved ids and every
per-question score (graphctx.evaluation.matrix.export). Ends with the files written (after the Hub URL
with --push-to-hub).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from graphctx.commands import wrote
from graphctx.errors import ConfigError, EndpointError

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
"""A Hub repository id, ``owner/name``."""
NO_COMMIT = (
    "note: graphctx is not run from its git checkout (a `pip install .`), so the card's "
    "exported_with_commit is null"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run",
        dest="run_dir",
        required=True,
        help="evaluation run folder (evaluate.py's --evaluation.output_dir)",
    )
    parser.add_argument("--to", required=True, help="dataset folder to write (must not exist)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace --to when an earlier export made it"
    )
    parser.add_argument(
        "--push-to-hub", metavar="REPO", help="also upload the folder to this Hub dataset repo (owner/name)"
    )


def check_repo(repo: str) -> None:
    """Refuse, before anything is written, a repo id that is not ``owner/name`` or a Hub set offline."""
    if not REPO_ID.match(repo) or ".." in repo:
        raise ConfigError(f"--push-to-hub {repo!r}: not a Hub repository id (owner/name)")
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        raise ConfigError(f"--push-to-hub {repo}: HF_HUB_OFFLINE is set; unset it to upload")


def execute(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.evaluation.matrix.export import export_run, git_commit, push_to_hub

    if args.push_to_hub is not None:
        check_repo(args.push_to_hub)
    commit = git_commit(Path(__file__).resolve().parents[2])  # graphctx's checkout
    if commit is None:
        print(NO_COMMIT, file=sys.stderr)
    folder = export_run(Path(args.run_dir), Path(args.to), args.overwrite, commit)
    if args.push_to_hub is not None:
        print(f"pushed: {upload(folder, args.push_to_hub, push_to_hub)}", file=out)
    wrote(out, sorted(path for path in folder.iterdir() if not path.name.startswith(".")))
    return 0


def upload(folder: Path, repo: str, push: Callable[[Path, str], str]) -> str:
    """``push(folder, repo)``'s URL; a failed upload (no network, no login, no access) is one
    :class:`EndpointError` line saying that ``folder`` is written and complete, and how to upload it
    later."""
    try:
        return push(folder, repo)
    except Exception as error:  # huggingface_hub's, its HTTP client's and the OS's errors alike
        reason = (str(error).strip().splitlines() or [""])[0]
        raise EndpointError(
            f"--push-to-hub {repo}: the upload failed ({type(error).__name__}: {reason}); {folder} is "
            f"written and complete: upload it later with `hf upload {repo} {folder} --repo-type dataset`"
        ) from error
