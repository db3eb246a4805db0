"""Peak memory of reading a large Stack Exchange dump: graphctx's streaming pipeline vs a whole-tree parse.

Generates a dump of at least ``--mb`` megabytes by repeating the real cardano posts under fresh ids (so
questions, accepted answers and duplicate links keep their real shapes; titles get a copy number), then,
each in its own process:
graphctx's full pipeline (``prepare_qa_dataset``: stream, join, clean, filter, split, save) on a dump of
``--mb / 5`` and of ``--mb``, and ``xml.etree.ElementTree.parse`` of the big dump (what a loader that reads
the whole tree does). Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def child(mode: str, folder: str, cache: str) -> None:
    """Run one reader in this process and print its JSON result (called in a subprocess)."""
    start = time.perf_counter()
    if mode == "graphctx":
        from graphctx.data import DatasetSettings, FilterSettings, prepare_qa_dataset

        settings = DatasetSettings(source=folder, filters=FilterSettings(max_tokens=None))
        _, summary = prepare_qa_dataset(settings, cache)
        result = {"questions": summary["questions"], "kept": summary["kept"]}
    else:
        import xml.etree.ElementTree as ET

        root = ET.parse(Path(folder) / "Posts.xml").getroot()
        result = {"rows": len(root)}
    result["seconds"] = time.perf_counter() - start
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def measure(mode: str, folder: Path, cache: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(folder), str(cache)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=512, help="size of the large generated Posts.xml")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
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
        small = measure("graphctx", tmp_path / "small", tmp_path / "cache")
        big = measure("graphctx", tmp_path / "big", tmp_path / "cache")
        naive = measure("etree", tmp_path / "big", tmp_path / "cache")
    print(
        json.dumps(
            {
                "dump_mb": round(big_mb, 1),
                "rows": big_rows,
                "graphctx_peak_rss_mb_at_fifth_size": round(small["peak_rss_mb"], 1),
                "graphctx_peak_rss_mb": round(big["peak_rss_mb"], 1),
                "graphctx_s": round(big["seconds"], 1),
                "graphctx_questions": big["questions"],
                "graphctx_kept": big["kept"],
                "etree_parse_peak_rss_mb": round(naive["peak_rss_mb"], 1),
                "etree_parse_s": round(naive["seconds"], 1),
            }
        )
    )


if __name__ == "__main__":
    main()
