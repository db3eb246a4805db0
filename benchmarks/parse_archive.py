"""Reading a site's dump from its .7z archive vs from the unpacked files, in the same run.

Generates a dump of at least ``--mb`` megabytes from the cardano rows (``parse_memory.generate_dump``),
compresses it to ``.7z`` with libarchive (LZMA), then runs graphctx's reader (``DumpReader``: stream every
row, store it, join questions with their answers) on the folder and on the archive, each in its own
process. Prints one JSON line: posts/s and peak RSS of both, the archive's compression ratio
(replicated rows compress far better than a real dump does) and the ratio of the two times.
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

import libarchive

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse_memory import generate_dump


def compress(folder: Path, target: Path) -> None:
    """``Posts.xml`` and ``PostLinks.xml`` of ``folder`` into a 7z archive (LZMA2 at level 1, to keep the
    benchmark short: LZMA decoding speed barely depends on the level), streamed in 1 MiB blocks."""
    options = "compression=lzma2,compression-level=1"
    with libarchive.file_writer(str(target), "7zip", options=options) as archive:
        for name in ("PostLinks.xml", "Posts.xml"):
            path = folder / name
            with open(path, "rb") as handle:
                blocks = iter(lambda handle=handle: handle.read(1 << 20), b"")
                archive.add_file_from_memory(name, path.stat().st_size, blocks)


def child(source: str, scratch: str) -> None:
    """Read ``source`` through graphctx's dump reader and print its JSON result (in a subprocess)."""
    from graphctx.data.stackexchange import DumpReader

    start = time.perf_counter()
    reader = DumpReader(source, Path(scratch))
    questions = sum(1 for _ in reader.questions())
    seconds = time.perf_counter() - start
    result = {
        "rows": reader.counts["rows"],
        "questions": questions,
        "seconds": seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(result))


def measure(source: Path, scratch: Path) -> dict:
    scratch.mkdir()
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(source), str(scratch)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=512, help="size of the generated Posts.xml")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate_dump(root / "site", args.mb)
        unpacked = sum((root / "site" / name).stat().st_size for name in ("Posts.xml", "PostLinks.xml"))
        start = time.perf_counter()
        compress(root / "site", root / "site.stackexchange.com.7z")
        compress_s = time.perf_counter() - start
        packed = (root / "site.stackexchange.com.7z").stat().st_size
        folder = measure(root / "site", root / "scratch-folder")
        archive = measure(root / "site.stackexchange.com.7z", root / "scratch-archive")
    print(
        json.dumps(
            {
                "dump_mb": round(unpacked / 1e6, 1),
                "archive_mb": round(packed / 1e6, 1),
                "compression_ratio": round(unpacked / packed, 1),
                "compress_s": round(compress_s, 1),
                "rows": folder["rows"],
                "unpacked_posts_per_s": round(folder["rows"] / folder["seconds"]),
                "archive_posts_per_s": round(archive["rows"] / archive["seconds"]),
                "archive_time_ratio": round(archive["seconds"] / folder["seconds"], 2),
                "unpacked_peak_rss_mb": round(folder["peak_rss_mb"], 1),
                "archive_peak_rss_mb": round(archive["peak_rss_mb"], 1),
                "same_rows": folder["rows"] == archive["rows"]
                and folder["questions"] == archive["questions"],
            }
        )
    )


if __name__ == "__main__":
    main()
