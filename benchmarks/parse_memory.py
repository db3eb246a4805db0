"""Peak memory of reading a large Stack Exchange dump: graphctx's streaming pipeline vs a whole-tree parse.

Generates a dump of at least ``--mb`` megabytes by repeating the real cardano posts under fresh ids (so
questions, accepted answers and duplicate links keep their real shapes; titles get a copy number), then,
each in its own process:
graphctx's full pipeline (``prepare_qa_dataset``: stream, join, clean, filter, split, save) on a dump of
``--mb / 5`` and of ``--mb``, and ``xml.etree.ElementTree.parse`` of the big dump (what a loader that reads
the whole tree does). Prints one JSON object as its last line.

HTML cleaning runs in ``--workers`` processes (default: one per core). ``graphctx_peak_rss_mb`` is the main
process's peak (``ru_maxrss``); ``graphctx_tree_peak_pss_mb`` is the peak of the summed proportional set
size of the main process and every descendant (forkserver, cleaning workers), sampled every 0.1 s: what
the whole build holds, shared pages counted once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from lxml import etree

REPO = Path(__file__).resolve().parents[1]
CARDANO = REPO.parent / "shared" / "data" / "stackexchange" / "cardano"
ID_FIELDS = ("Id", "AcceptedAnswerId", "ParentId")


def generate_dump(folder: Path, megabytes: float) -> int:
    """Write Posts.xml and PostLinks.xml of at least ``megabytes`` MB; returns the number of post rows."""
    posts = [dict(row.attrib) for row in etree.parse(str(CARDANO / "Posts.xml")).getroot()]
    links = [dict(row.attrib) for row in etree.parse(str(CARDANO / "PostLinks.xml")).getroot()]
    stride = max(int(row["Id"]) for row in posts) + 1
    folder.mkdir(parents=True, exist_ok=True)
    target, copies, rows = megabytes * 1e6, 0, 0
    with open(folder / "Posts.xml", "wb") as out_posts, open(folder / "PostLinks.xml", "wb") as out_links:
        out_posts.write(b'<?xml version="1.0" encoding="utf-8"?>\n<posts>\n')
        out_links.write(b'<?xml version="1.0" encoding="utf-8"?>\n<postlinks>\n')
        while out_posts.tell() < target:
            offset = copies * stride
            for row in posts:
                shifted = {k: str(int(v) + offset) if k in ID_FIELDS else v for k, v in row.items()}
                if copies and "Title" in shifted:  # unique titles, so the duplicate-title filter keeps copies
                    shifted["Title"] = f"{shifted['Title']} ({copies})"
                out_posts.write(b"  " + etree.tostring(etree.Element("row", shifted)) + b"\n")
                rows += 1
            for row in links:
                shifted = {
                    k: str(int(v) + offset) if k in ("PostId", "RelatedPostId") else v for k, v in row.items()
                }
                out_links.write(b"  " + etree.tostring(etree.Element("row", shifted)) + b"\n")
            copies += 1
        out_posts.write(b"</posts>\n")
        out_links.write(b"</postlinks>\n")
    return rows


class TreeMemorySampler:
    """Peak summed PSS (MB) of this process and all its descendants, sampled in a background thread."""

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeMemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(self.interval_s):
            total = 0
            for process in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):  # a worker that exited between listing and reading
                    total += process.memory_full_info().pss
            self.peak_mb = max(self.peak_mb, total / 2**20)  # MiB, like ru_maxrss / 1024


def child(mode: str, folder: str, cache: str, workers: str) -> None:
    """Run one reader in this process and print its JSON result (called in a subprocess)."""
    start = time.perf_counter()
    with TreeMemorySampler() as tree:
        if mode == "graphctx":
            from graphctx.data import DatasetSettings, FilterSettings, prepare_qa_dataset

            settings = DatasetSettings(
                source=folder,
                filters=FilterSettings(max_tokens=None),
                workers=int(workers) if workers != "all" else None,
            )
            _, summary = prepare_qa_dataset(settings, cache)
            result = {"questions": summary["questions"], "kept": summary["kept"]}
        else:
            import xml.etree.ElementTree as ET

            root = ET.parse(Path(folder) / "Posts.xml").getroot()
            result = {"rows": len(root)}
    result["seconds"] = time.perf_counter() - start
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["tree_peak_pss_mb"] = tree.peak_mb
    print(json.dumps(result))


def measure(mode: str, folder: Path, cache: Path, workers: str = "all") -> dict:
    """Run ``child`` in a fresh interpreter, so each measurement starts from an empty process."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(folder), str(cache), workers],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=512, help="size of the large generated Posts.xml")
    parser.add_argument("--workers", default="all", help="HTML cleaning processes: a number, or all cores")
    parser.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="unused: parsing is CPU work"
    )
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        small_rows = generate_dump(tmp_path / "small", args.mb / 5)
        big_rows = generate_dump(tmp_path / "big", args.mb)
        big_mb = (tmp_path / "big" / "Posts.xml").stat().st_size / 1e6
        print(f"generated {small_rows:,} and {big_rows:,} rows ({big_mb:.0f} MB)", file=sys.stderr)
        small = measure("graphctx", tmp_path / "small", tmp_path / "cache", args.workers)
        big = measure("graphctx", tmp_path / "big", tmp_path / "cache", args.workers)
        naive = measure("etree", tmp_path / "big", tmp_path / "cache")
    print(
        json.dumps(
            {
                "dump_mb": round(big_mb, 1),
                "rows": big_rows,
                "graphctx_peak_rss_mb_at_fifth_size": round(small["peak_rss_mb"], 1),
                "workers": args.workers,
                "graphctx_peak_rss_mb": round(big["peak_rss_mb"], 1),
                "graphctx_tree_peak_pss_mb_at_fifth_size": round(small["tree_peak_pss_mb"], 1),
                "graphctx_tree_peak_pss_mb": round(big["tree_peak_pss_mb"], 1),
                "graphctx_s": round(big["seconds"], 1),
                "graphctx_questions": big["questions"],
                "graphctx_kept": big["kept"],
                "etree_parse_peak_rss_mb": round(naive["peak_rss_mb"], 1),
                "etree_parse_tree_peak_pss_mb": round(naive["tree_peak_pss_mb"], 1),
                "etree_parse_s": round(naive["seconds"], 1),
            }
        )
    )


if __name__ == "__main__":
    main()
