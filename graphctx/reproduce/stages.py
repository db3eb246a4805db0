"""The paper's protocol as data: one :class:`Stage` per (site, step), each the command a user would type.

Per site: ``data`` (``graphctx data``) → ``index`` (``graphctx index``) → ``train`` (train.py) → ``genqa``
(``graphctx genqa``, when GenQA is evaluated) → ``evaluate`` (evaluate.py, its batches dealt over every task
of the job) → ``sweep`` (``evaluate.py --models``, when models are given) and ``human`` (``graphctx annotate
export``); then one ``tables`` stage gathers every site's "Beside the paper" table. A stage needs only what it
reads (``train`` needs ``data``, not ``index``), so SLURM runs independent stages side by side.

A stage's :attr:`Stage.fingerprint` is :func:`graphctx.cache.fingerprint` of its command and of the settings
it reads (the data stage: also the dump's part of the dataset cache key,
:func:`graphctx.data.sources.source_fingerprint`; the evaluate and sweep stages: also the sources of the
user's plug-in packages, :func:`graphctx.plugins.package_sources`, and genqa those of its retrievers);
:mod:`graphctx.reproduce.state` adds the fingerprints of what its needs made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphctx.cache import fingerprint
from graphctx.paths import inside
from graphctx.plugins import config_plugin_sources
from graphctx.retrieval.settings import RetrievalSettings

if TYPE_CHECKING:
    from graphctx.reproduce.sites import Site

GRAPHCTX = ("python", "-m", "graphctx.cli")
"""The ``graphctx`` console script, as a module (the job's ``python`` is the one on its PATH)."""
TEMPLATES = {"train.py": "scripts/slurm/train.sbatch", "evaluate.py": "scripts/slurm/evaluate.sbatch"}
"""Entry points whose stages run through the project's own SLURM templates (the SIGUSR1 + requeue resume
contract, one task per GPU)."""
STAGE_SCRIPT = "scripts/slurm/stage.sbatch"
"""The SLURM script of every other stage."""


@dataclass(frozen=True)
class Resources:
    """What a stage's job asks SLURM for: ``gpus`` and ``tasks`` per node, ``cpus`` per task, ``mem`` per
    node (``0``: all of it; None: the partition's default) and the time limit."""

    gpus: int
    cpus: int
    mem: str | None
    time: str
    nodes: int = 1
    tasks: int = 1

    def describe(self) -> str:
        mem = "default" if self.mem is None else ("all" if self.mem == "0" else self.mem)
        tasks = f"{self.nodes}×{self.tasks} tasks, {self.gpus} GPU/node, {self.cpus} CPU/task"
        return f"{tasks}, mem {mem}, {self.time}"


CPU_STAGE = Resources(gpus=0, cpus=2, mem=None, time="4:00:00")
"""A CPU stage: two cores (HTML cleaning, embedding, PageRank, file writing)."""


@dataclass(frozen=True)
class Stage:
    """One step of one site (``site`` None: the stage of every site)."""

    name: str
    site: str | None
    needs: tuple[str, ...]
    command: tuple[str, ...]
    resources: Resources
    outputs: tuple[str, ...]
    fingerprint: str
    stdout: str | None = None
    """The file the command's stdout becomes (the stage's output), else None."""
    kind: str = ""
    resumes_in: str | None = None
    """The folder whose ``hpc_ckpt_*.ckpt`` a SLURM run of this stage resumes from (train.py under SLURM)."""

    @property
    def script(self) -> str:
        """The sbatch script this stage is submitted with."""
        return TEMPLATES.get(self.command[1], STAGE_SCRIPT)

    @property
    def script_args(self) -> tuple[str, ...]:
        """What follows the script on the sbatch line (a template takes the entry point's arguments)."""
        return self.command[2:] if self.command[1] in TEMPLATES else self.command


@dataclass(frozen=True)
class Options:
    """What the command line adds to the configs."""

    state: Path
    sweep_models: tuple[str, ...] = ()
    annotators: tuple[str, ...] = ("annotator1", "annotator2", "annotator3")
    human_variants: tuple[str, ...] = ("GraphContextGen", "TextContextGen")
    """Variants rated in the human evaluation (those the config evaluates; none of them: every one)."""
    human_questions: int = 50
    digest_sources: bool = True
    """Hash each dump for the data stages' fingerprints (off for ``--dry-run``, which needs no dump)."""


def _job(config: Any) -> Resources:
    """A train/evaluate job: ``trainer.devices`` tasks on each of ``trainer.num_nodes`` nodes (one GPU each
    on a GPU config, the node's whole memory, as the templates ask)."""
    trainer = config.trainer
    devices = trainer.get("devices")
    tasks = devices if isinstance(devices, int) else 1
    gpu = trainer.get("accelerator") != "cpu"
    return Resources(
        gpus=tasks if gpu else 0,
        cpus=8 if gpu else 2,
        mem="0" if gpu else None,
        time="24:00:00",
        nodes=int(trainer.get("num_nodes") or 1),
        tasks=tasks,
    )


def _index_job(config: Any) -> Resources:
    """The index stage's job: a CPU stage, or one GPU when ``retrieval.device`` asks for CUDA (the paper
    configs embed the pool with bge-large-en there; on a CPU allocation ``graphctx index`` would refuse)."""
    if str(config.retrieval.device).startswith("cuda"):
        return dataclasses.replace(CPU_STAGE, gpus=1, cpus=8)
    return CPU_STAGE


def _one_device(job: Resources) -> Resources:
    """One task on one node, with one GPU when the job has GPUs (``graphctx genqa`` trains on one device)."""
    return dataclasses.replace(job, tasks=1, nodes=1, gpus=min(job.gpus, 1))


def _settings(*sections: Any) -> list[Any]:
    """The sections as stage stamps hold them; the retrieval section flat
    (:meth:`~graphctx.retrieval.settings.RetrievalSettings.flat`), as stamped before ``retrieval.scale``
    existed, so that a finished stage is not run again."""
    return [_stamped(s) for s in sections]


def _stamped(section: Any) -> Any:
    if isinstance(section, RetrievalSettings):
        return section.flat()
    return dataclasses.asdict(section) if dataclasses.is_dataclass(section) else section


def site_stages(site: Site, options: Options) -> list[Stage]:
    """The stages of one site, in the protocol's order."""
    from graphctx.data.sources import source_fingerprint
    from graphctx.prompts import get_variants

    config, path, name = site.config, str(site.path), site.name
    folder = inside(options.state, name, where=f"{site.path}: site {name}")
    evaluated = [v.name for v in get_variants(config.evaluation.variants)]
    dataset = config.data.dataset
    source = source_fingerprint(dataset.source) if options.digest_sources else None
    knowledge, retrievers = config.knowledge, config.retrieval.extra
    plugins = config_plugin_sources(
        [retrievers, knowledge.extra, knowledge.extractors_extra, config.evaluation.metrics.extra]
    )  # the code of the user's plug-ins, read by the stages that run them (none: nothing added)
    code = [plugins] if plugins else []
    retriever_code = [config_plugin_sources([retrievers])] if retrievers else []
    every = [*_settings(
        config.trainer, config.model, config.data, config.retrieval, config.knowledge, config.generation,
        config.evaluation, config.seed_everything,
    ), *code]  # fmt: skip

    def stage(
        kind: str, needs: Sequence[str], command: Sequence[str], reads: list[Any], **more: Any
    ) -> Stage:
        parts = [list(command), reads]
        return Stage(
            name=f"{name}/{kind}",
            site=name,
            needs=tuple(f"{name}/{need}" for need in needs),
            command=tuple(command),
            resources=more.pop("resources", CPU_STAGE),
            outputs=tuple(str(p) for p in more.pop("outputs", ())),
            fingerprint=fingerprint(*parts),
            kind=kind,
            **more,
        )

    output_dir = config.output_dir
    adapter = Path(config.adapter_dir)
    stages = [
        stage(
            "data", [], [*GRAPHCTX, "data", dataset.source, "--config", path],
            [source, _settings(config.data.dataset, config.model.spec), config.cache_dir],
            stdout=str(folder / "data.txt"), outputs=[folder / "data.txt"],
        ),
        stage(
            "index", ["data"], [*GRAPHCTX, "index", "--config", path, "--json"],
            _settings(config.data.dataset, config.retrieval, config.evaluation.split, config.cache_dir),
            stdout=str(folder / "index.json"), outputs=[folder / "index.json"], resources=_index_job(config),
        ),
        stage(
            "train", ["data"], ["python", "train.py", "--config", path],
            _settings(config.trainer, config.model, config.data, config.seed_everything),
            resources=_job(config), resumes_in=str(config.root_dir),
            outputs=[adapter / "adapter_config.json", adapter / "adapter_model.safetensors"],
        ),
    ]  # fmt: skip
    evaluate_needs = ["index", "train"]
    if "GenQA" in evaluated:
        stages.append(
            stage(
                "genqa", ["index"], [*GRAPHCTX, "genqa", "--config", path],
                [*_settings(config.data, config.retrieval, config.evaluation.genqa_model), *retriever_code],
                outputs=[config.genqa_dir], resources=_one_device(_job(config)),
            )
        )  # fmt: skip
        evaluate_needs.append("genqa")
    stages.append(
        stage(
            "evaluate", evaluate_needs, ["python", "evaluate.py", "--config", path], every,
            resources=_job(config), outputs=[output_dir / "results.csv", output_dir / "results.md"],
        )
    )  # fmt: skip
    if options.sweep_models:
        stages.append(
            stage(
                "sweep", ["evaluate"],
                ["python", "evaluate.py", "--config", path, "--models", *options.sweep_models],
                every, resources=_job(config), outputs=[output_dir / "sweep.csv", output_dir / "sweep.md"],
            )
        )  # fmt: skip
    rated = [name for name in options.human_variants if name in evaluated] or evaluated
    questions = min(options.human_questions, config.evaluation.limit or options.human_questions)
    human = folder / "human"
    stages.append(
        stage(
            "human", ["evaluate"],
            [*GRAPHCTX, "annotate", "export", "--config", path, "--variants", *rated, "--questions",
             str(questions), "--annotators", *options.annotators, "--out", str(human), "--overwrite"],
            [], outputs=[human / "key.json"],
        )
    )  # fmt: skip
    return stages


KINDS = ("data", "index", "train", "genqa", "evaluate", "sweep", "human", "tables")
"""Every kind of stage, in the protocol's order."""


def only(stages: Sequence[Stage], kinds: Sequence[str]) -> list[Stage]:
    """The stages of ``kinds`` and every stage they need, directly or not, in order."""
    by_name = {stage.name: stage for stage in stages}
    wanted = {stage.name for stage in stages if stage.kind in kinds}
    pending = list(wanted)
    while pending:
        for need in by_name[pending.pop()].needs:
            if need not in wanted:
                wanted.add(need)
                pending.append(need)
    return [stage for stage in stages if stage.name in wanted]


def build_stages(sites: Sequence[Site], options: Options) -> list[Stage]:
    """Every site's stages, then ``tables``: each site's "Beside the paper" section in one file."""
    stages = [stage for site in sites for stage in site_stages(site, options)]
    results = [str(site.config.output_dir / "results.md") for site in sites]
    out = options.state / "beside_the_paper.md"
    command = ("python", "-m", "graphctx.reproduce.tables", "--out", str(out), *results)
    stages.append(
        Stage(
            name="tables",
            site=None,
            needs=tuple(f"{site.name}/evaluate" for site in sites),
            command=command,
            resources=dataclasses.replace(CPU_STAGE, cpus=1, time="0:10:00"),
            outputs=(str(out),),
            fingerprint=fingerprint(list(command)),
            kind="tables",
        )
    )
    return stages
