"""Show the cache folder's size by kind, and remove the entries that no given config reaches.

``graphctx cache`` lists each kind (``<cache>/<kind>/``) with its entries and bytes. With ``--config``
(repeated, one per config whose entries are to be kept), it also says how many entries those configs'
runs read (:func:`graphctx.pipeline.cache_keys.reached`); ``--prune`` removes the others (``--dry-run``
lists them instead). A kind whose entries cannot be listed without running the stage is named with why,
and kept whole.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Each --config is read as it is by the stages: this command takes no --section.key settings. "
        "Without --config it shows the cache of $GRAPHCTX_CACHE, else .cache/graphctx."
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        help="YAML config whose entries are kept; repeat it for each config (all must share one cache)",
    )
    parser.add_argument(
        "--prune", action="store_true", help="remove the entries no --config reaches (needs --config)"
    )
    parser.add_argument("--dry-run", action="store_true", help="with --prune: list them, remove nothing")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")


def report(root: Path, reach: Any | None) -> tuple[dict[str, Any], list[Path]]:
    """Per kind: entries, bytes and, given what the configs reach, the entries they read or why those
    cannot be listed; and the entries they do not reach (none for an open kind)."""
    from graphctx.cache import entries, entry_bytes

    kinds, unreached = {}, []
    for kind, found in entries(root).items():
        row: dict[str, Any] = {"entries": len(found), "bytes": sum(map(entry_bytes, found))}
        if reach is not None and kind in reach.open:
            row["open"] = reach.open[kind]
        elif reach is not None:
            keys = reach.keys.get(kind, set())
            stale = [entry for entry in found if entry.name not in keys]
            row |= {"reached": len(found) - len(stale), "unreached": len(stale)}
            unreached += stale
        kinds[kind] = row
    return kinds, unreached


def text_lines(root: Path, kinds: dict[str, Any]) -> list[str]:
    """The report, one line per kind, then the total."""
    lines = [f"cache {root}"]
    for kind, row in kinds.items():
        line = f"  {kind:<16} {row['entries']:>6} entries {row['bytes'] / 1e6:>10.1f} MB"
        if "open" in row:
            line += f"  kept whole: {row['open']}"
        elif "reached" in row:
            line += f"  reached {row['reached']}, unreached {row['unreached']}"
        lines.append(line)
    total = sum(row["bytes"] for row in kinds.values())
    lines.append(
        f"  {'total':<16} {sum(r['entries'] for r in kinds.values()):>6} entries {total / 1e6:>10.1f} MB"
    )
    return lines


def execute(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.cache import cache_path, remove_entry
    from graphctx.commands import wrote
    from graphctx.errors import ConfigError
    from graphctx.pipeline.cache_keys import reached
    from graphctx.pipeline.config_file import load_config

    if (args.prune or args.dry_run) and not args.config:
        raise ConfigError("--prune: needs --config (the configs whose entries are kept)")
    if args.dry_run and not args.prune:
        raise ConfigError("--dry-run: lists what --prune would remove; give --prune too")
    configs = [load_config(path) for path in args.config]
    roots = {cache_path(config.cache_dir) for config in configs} or {cache_path()}
    if len(roots) > 1:
        raise ConfigError(f"--config: the configs name different cache folders ({sorted(map(str, roots))})")
    root = roots.pop()
    reach = None
    for config in configs:
        found = reached(config)
        reach = found if reach is None else reach.merge(found)
    kinds, unreached = report(root, reach)
    removed = [] if args.dry_run or not args.prune else [entry for entry in unreached if remove_entry(entry)]
    if args.json:
        listed = {
            "unreached" if args.dry_run else "removed": [
                str(p) for p in (unreached if args.dry_run else removed)
            ]
        }
        print(json.dumps({"cache": str(root), "kinds": kinds, **listed}), file=out)
    else:
        print("\n".join(text_lines(root, kinds)), file=out)
        if args.dry_run:
            print("\n".join(f"would remove: {entry}" for entry in unreached) or "nothing to remove", file=out)
    if args.prune and not args.dry_run:
        wrote(out, removed, args.json, verb="removed")
    return 0
