"""The gold side of a metric, computed once per gold text and shared by every variant.

A metric that extracts something from the gold answer (FactSumm's facts, triplets, UniversalNER's
entities) asks :class:`GoldSide` for it. Each distinct gold text is extracted **alone**, as its own batch,
so its value never depends on which rows (of which variant, at which batch size) it was scored with: left
padding in a batch of UniversalNER prompts, for one, changes greedy answers. The values are kept in a
mapping that the caller may back with files (:class:`FolderStore`), keyed by the text's SHA-256, so a rerun
or another variant reads them instead of extracting again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from graphctx.cache import write_json_atomic

Extract = Callable[[str], Any]
"""One text → its JSON-serialisable gold value."""


def text_key(text: str) -> str:
    """The SHA-256 of ``text`` (UTF-8), the key of its gold value."""
    return hashlib.sha256(text.encode()).hexdigest()


class FolderStore(MutableMapping[str, Any]):
    """Gold values as one JSON file per text key in ``folder``, each written atomically."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def __getitem__(self, key: str) -> Any:
        try:
            return json.loads(self._path(key).read_text())
        except (FileNotFoundError, json.JSONDecodeError) as error:
            raise KeyError(key) from error

    def __setitem__(self, key: str, value: Any) -> None:
        write_json_atomic(self._path(key), value)

    def __delitem__(self, key: str) -> None:
        self._path(key).unlink()

    def __iter__(self) -> Iterator[str]:
        return (path.stem for path in sorted(self.folder.glob("*.json")))

    def __len__(self) -> int:
        return sum(1 for _ in self.folder.glob("*.json"))


class GoldSide:
    """Gold values of texts: read from ``store``, else extracted one text at a time and stored."""

    def __init__(self, extract: Extract, store: MutableMapping[str, Any] | None = None) -> None:
        self.extract = extract
        self.store: MutableMapping[str, Any] = {} if store is None else store
        self.extracted = 0
        """Texts extracted by this object (not read from the store)."""

    def __call__(self, texts: Sequence[str]) -> list[Any]:
        values: dict[str, Any] = {}
        for text in texts:
            key = text_key(text)
            if key in values:
                continue
            try:
                values[key] = self.store[key]
            except KeyError:
                values[key] = self.store[key] = self.extract(text)
                self.extracted += 1
        return [values[text_key(text)] for text in texts]
