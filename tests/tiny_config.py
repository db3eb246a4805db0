"""configs/tiny.yaml's settings, for tests that build their own configs around them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"


def tiny_split(**changes: str) -> dict[str, Any]:
    """The tiny config's split of the cardano sample (its dates), with ``changes``."""
    return {**yaml.safe_load(TINY.read_text())["data"]["dataset"]["split"], **changes}
