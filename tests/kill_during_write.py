"""Build one cached artefact and SIGKILL this very process at a chosen moment of its cache write.

    python tests/kill_during_write.py ARTEFACT MOMENT CACHE_DIR SHARED_DATA

ARTEFACT: dataset | embeddings | index | kg-store. MOMENT: ``open:<name>`` kills when a file called <name> is
opened for writing inside the entry's temporary folder (part of the entry is on disk, the rest is not);
``publish`` kills just before the temporary is renamed onto the cache entry (all bytes written, nothing
published). A Python audit hook sees the open/rename, prints ``killing at ...`` and sends SIGKILL to the
process, so nothing (no ``finally``, no atexit) can clean up: the state on disk is what a power cut leaves.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

KIND_FOLDER = {
    "dataset": "datasets",
    "embeddings": "embeddings",
    "index": "retrieval-index",
    "kg-store": "kg-store",
}


def install_kill_hook(kind_folder: str, moment: str) -> None:
    def hook(event: str, args: tuple) -> None:
        hit = False
        if moment == "publish" and event == "os.rename":
            hit = Path(os.fsdecode(args[1])).parent.name == kind_folder
        elif (
            moment.startswith("open:") and event == "open" and isinstance(args[0], (str, bytes, os.PathLike))
        ):
            path = Path(os.fsdecode(args[0]))
            writing = isinstance(args[1], str) and any(flag in args[1] for flag in "wax")
            hit = writing and path.name == moment[5:] and any(p.name.endswith(".tmp") for p in path.parents)
        if hit:
            print(f"killing at {event} {args[:2]}", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)


def build(artefact: str, cache: str, shared: Path) -> None:
    """The same calls the pipeline makes; each writes its entry through atomic_path or publish_once."""
    if artefact == "dataset":
        from graphctx.data.build import load_qa_dataset
        from graphctx.data.settings import DatasetSettings, FilterSettings

        settings = DatasetSettings(source=str(shared / "stackexchange" / "cardano"))
        settings.filters = FilterSettings(max_tokens=None)
        load_qa_dataset(settings, cache)
    elif artefact in ("embeddings", "index"):
        from graphctx.retrieval.builders import build_embeddings
        from graphctx.retrieval.index import build_index
        from graphctx.retrieval.settings import RetrievalSettings

        texts = POOL_TEXTS
        settings = RetrievalSettings(device="cpu", threshold=0.3)
        if artefact == "embeddings":
            build_embeddings(texts, settings, cache_dir=cache)
        else:
            build_index(list(range(len(texts))), texts, settings, cache_dir=cache)
    elif artefact == "kg-store":
        from graphctx.knowledge.settings import KnowledgeSettings
        from graphctx.knowledge.store import build_store

        build_store(KnowledgeSettings(kg_dir=str(shared / "kg"), cache_dir=cache))
    else:
        raise SystemExit(f"unknown artefact {artefact}")


POOL_TEXTS = [
    "How do I stake ADA with a hardware wallet?",
    "Staking ADA from a Ledger wallet",
    "What is a Plutus script datum?",
    "How are transaction fees computed on Cardano?",
]


if __name__ == "__main__":
    artefact, moment, cache_dir, shared_data = sys.argv[1:5]
    install_kill_hook(KIND_FOLDER[artefact], moment)
    build(artefact, cache_dir, Path(shared_data))
    print("finished without reaching the kill point", file=sys.stderr)
