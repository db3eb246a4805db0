"""The sites of a reproduction: one config per site, checked to agree before any stage is planned.

A site's name is ``data.dataset.site``, else its dump's name (``askubuntu.com.7z`` → ``askubuntu``), as
``graphctx annotate`` and results.md's "Beside the paper" name it. The configs of one reproduction must
agree where a later stage compares or reuses what an earlier one made: one base model for every site (the
tables and the sweep lay the sites side by side), and the adapter evaluate.py reads is the one train.py
exports (``evaluation.adapter`` naming another folder would score an adapter this reproduction never made).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from graphctx.data.dumpfiles import site_name
from graphctx.errors import ConfigError
from graphctx.paths import check_site
from graphctx.pipeline.config_file import load_config
from graphctx.pipeline.run_config import RunConfig


@dataclass(frozen=True)
class Site:
    """One site of the reproduction: its name, its config file and the parsed config."""

    name: str
    path: Path
    config: RunConfig


def site_of(config: RunConfig) -> str:
    """``data.dataset.site``, else the name of the dump it reads; a site's name (it names the site's folder
    of the state folder), else a ``ConfigError``."""
    dataset = config.data.dataset
    if dataset.site:
        return check_site(dataset.site, "data.dataset.site")
    name = site_name(Path(dataset.source.removeprefix("hf:")))
    return check_site(name, f"data.dataset.source {dataset.source} (data.dataset.site unset)")


def load_sites(paths: Sequence[str], chosen: Sequence[str] | None) -> list[Site]:
    """The sites of ``paths`` (one config each), cut to ``chosen`` (``--sites``) in the order given; a
    ``ConfigError`` naming the file and setting when they disagree."""
    sites: dict[str, Site] = {}
    for path in paths:
        config = load_config(path, devices=False)
        site = Site(site_of(config), Path(path), config)
        if site.name in sites:
            raise ConfigError(
                f"{path}: site {site.name} is also the site of {sites[site.name].path} (data.dataset.site); "
                "give one config per site"
            )
        sites[site.name] = site
    if chosen:
        unknown = [name for name in chosen if name not in sites]
        if unknown:
            given = ", ".join(f"{s.name} ({s.path})" for s in sites.values())
            raise ConfigError(f"--sites {' '.join(unknown)}: no --config is for this site (configs: {given})")
        sites = {name: sites[name] for name in chosen}
    every = list(sites.values())
    for site in every:
        check_adapter(site)
    first = every[0]
    for site in every[1:]:
        ours, theirs = site.config.model.spec.source, first.config.model.spec.source
        if ours != theirs:
            raise ConfigError(
                f"{site.path}: model.spec.source {ours} differs from {first.path}'s {theirs}; the tables "
                "lay the sites side by side on one base model"
            )
    check_own_roots(every)
    return every


def check_own_roots(sites: Sequence[Site]) -> None:
    """Refuse two sites that train into one folder (``trainer.default_root_dir``): the second train stage
    would resume from the first's checkpoints and overwrite its adapter."""
    seen: dict[Path, Site] = {}
    for site in sites:
        root = Path(site.config.root_dir).resolve()
        if root in seen:
            raise ConfigError(
                f"{site.path}: trainer.default_root_dir {site.config.root_dir} is also the training folder "
                f"of site {seen[root].name} ({seen[root].path}); give each site its own"
            )
        seen[root] = site


def check_adapter(site: Site) -> None:
    """Refuse an ``evaluation.adapter`` that is not where train.py exports this config's adapter."""
    config = site.config
    # where train.py exports it (graphctx.model.module.exported_adapter_dir, which imports Lightning)
    exported = Path(config.model.export.adapter_dir or config.root_dir / "adapter")
    chosen = config.evaluation.adapter
    if chosen is not None and Path(chosen).resolve() != exported.resolve():
        raise ConfigError(
            f"{site.path}: evaluation.adapter {chosen} is not the adapter the train stage exports "
            f"({exported}, from model.export.adapter_dir / trainer.default_root_dir); leave it null"
        )
