"""Instruction-tune a (Q)LoRA adapter: ``python train.py --config configs/tiny.yaml [--section.key value]``.

Built on LightningCLI: ``--print_config`` shows the full resolved config, dotted overrides change any field
(``--trainer.max_steps 10``, ``--model.lora.r 16``), unknown or mistyped keys fail with the key's name.
``--ckpt_path last`` resumes from the newest ``last.ckpt`` at the same global step and data position; under
SLURM a requeued job resumes from Lightning's HPC checkpoint by itself. graphctx's own errors (bad data,
config or checkpoint, a missing model) end the run with one ``error: ...`` line and exit status 1;
``--debug`` (or ``GRAPHCTX_DEBUG=1``) shows the traceback too. The data, the splits and every setting are
checked before any logger, run folder or config.yaml is written. stdout carries the result only (the
exported adapter's folder); Lightning's model summary, progress bars and every log go to stderr.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, TextIO

import torch
from jsonargparse import Namespace
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.cli import LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities import rank_zero_only

from graphctx.cache import fingerprint
from graphctx.command_line import add_version
from graphctx.data.build import EmptySplitError
from graphctx.data.datamodule import InstructionDataModule
from graphctx.errors import ConfigError, DataError, GraphctxError, debug_enabled, report
from graphctx.evaluation.matrix.callback import validation_callback
from graphctx.folder_lock import holding
from graphctx.model import InstructionTuner, load_tokenizer
from graphctx.model.guards import FiniteLossGuard
from graphctx.model.module import exported_adapter_dir
from graphctx.model.preemption import RequeueAtStepBoundary, finish_wandb_runs
from graphctx.model.progress import PlainProgress
from graphctx.pipeline.config_file import (
    SETTINGS_SECTIONS,
    add_sections,
    check_devices,
    check_mapping,
    check_moved_keys,
    check_settings,
    use_unique_yaml,
)
from graphctx.pipeline.run_config import RunConfig
from graphctx.quiet import quiet_third_party
from graphctx.settings_docs import field_docstrings
from graphctx.stack.memory import check_memory
from graphctx.stack.model_stack import ModelStack, check_models
from graphctx.stack.report import plan_json, plan_text

DUMP_HINT = (
    "hint: Stack Exchange dumps (askubuntu.com.7z, unix.stackexchange.com.7z, serverfault.com.7z) are at "
    "https://archive.org/details/stackexchange; extract one so that data.dataset.source holds Posts.xml."
)


class LogConfigCallback(SaveConfigCallback):
    """Write ``config.yaml`` to the log folder and send the full config, with the resolved stack
    (``graphctx plan``) under ``plan``, to every logger (W&B, CSV)."""

    plan: dict[str, Any] | None = None

    def save_config(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        config = self.config.clone()
        config.pop("config", None)
        plain = json.loads(json.dumps(config.as_dict(), default=str))  # tuples -> lists, paths -> str
        if self.plan is not None:
            plain["plan"] = self.plan
        for logger in trainer.loggers:
            logger.log_hyperparams(plain)


COMMAND_LINE = Path("(command line)")
"""The run config's ``path`` when no ``--config`` file was given."""
LIGHTNING_CHECKPOINT_KEYS = ("state_dict", "global_step", "loops", "optimizer_states")
"""What a Lightning training checkpoint holds that resuming reads."""
CKPT_PATH_NAMES = ("last", "best", "hpc")
"""``--ckpt_path`` values that Lightning resolves to a file itself."""
_LORA_KEY = re.compile(r"^model\.base_model\.model\.(.+)\.lora_([AB])\.[^.]+\.weight$")


def check_checkpoint(path: str | None, target_modules: list[str], rank: int) -> None:
    """Refuse a ``--ckpt_path`` file that is not a Lightning checkpoint of this model's adapter (unreadable,
    without the training state, or with weights that are not LoRA ``rank`` weights of ``target_modules``)."""
    if path is None or path in CKPT_PATH_NAMES or path.startswith("registry"):
        return
    if not Path(path).is_file():
        raise ConfigError(f"--ckpt_path: {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # torch.load raises many kinds for a file that is not a checkpoint
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConfigError(f"--ckpt_path: {path} is not a readable checkpoint ({reason})") from error
    missing = [
        key for key in LIGHTNING_CHECKPOINT_KEYS if not isinstance(checkpoint, dict) or key not in checkpoint
    ]
    if missing:
        raise ConfigError(
            f"--ckpt_path: {path} is not a Lightning training checkpoint (no {', '.join(missing)})"
        )
    state = checkpoint["state_dict"]
    if not state:
        raise ConfigError(f"--ckpt_path: {path} holds no adapter weights")
    for name, tensor in state.items():
        match = _LORA_KEY.match(name)
        if match is None or match.group(1).rsplit(".", 1)[-1] not in target_modules:
            raise ConfigError(
                f"--ckpt_path: {path} is not a checkpoint of this adapter: {name} is not a LoRA weight of "
                f"model.lora.target_modules {target_modules}"
            )
        if tensor.shape[0 if match.group(2) == "A" else 1] != rank:
            raise ConfigError(
                f"--ckpt_path: {path}: {name} has rank {tuple(tensor.shape)}, model.lora.r is {rank}"
            )


def stable_wandb_id(project: str | None, name: str | None, root_dir: str) -> str:
    """A W&B run id fixed by project, run name and output folder, so a resumed run continues the same run."""
    return fingerprint("wandb", project, name, str(Path(root_dir).resolve()))


class TrainCLI(LightningCLI):
    """LightningCLI for :class:`InstructionTuner` and :class:`InstructionDataModule`, one config per run.

    Its ``model`` and ``data`` keys are those of their settings dataclasses (``TunerSettings``,
    ``DataModuleSettings``), as in every other entry point's config: the CLI builds the run config
    (:attr:`run`) from them, and the modules from the run config.
    """

    def __init__(self, *args: Any, config_path: Path = COMMAND_LINE, **kwargs: Any) -> None:
        """``config_path``: the config file the run config names (the last ``--config``)."""
        self.config_path = config_path
        super().__init__(*args, **kwargs)

    def add_core_arguments_to_parser(self, parser) -> None:
        """The Trainer's arguments, ``cache_dir`` and every settings section (see
        :func:`graphctx.pipeline.config_file.add_sections`)."""
        parser.add_lightning_class_args(self.trainer_class, "trainer")
        parser.set_defaults({f"trainer.{k}": v for k, v in self.trainer_defaults.items() if k != "callbacks"})
        add_sections(parser)

    def add_arguments_to_parser(self, parser) -> None:
        add_version(parser)
        parser.add_argument(
            "--ckpt_path",
            type=str | None,
            default=None,
            help="Resume from this checkpoint; 'last' = the newest last.ckpt of the ModelCheckpoint folder.",
        )

    def parse_arguments(self, parser, args) -> None:
        """Parse, put every output path left unset under ``trainer.default_root_dir`` (see
        :func:`root_outputs`; a CSVLogger's ``save_dir`` is required, so before validation), validate."""
        self.config = parser.parse_args(args, _skip_validation=True)
        trainer = self.config.trainer
        root_outputs(trainer, trainer.default_root_dir or ".")
        try:
            parser.validate(self.config)
        except (TypeError, KeyError) as error:  # as parse_args would: the key's name, usage, exit 2
            parser.error(str(error), error)

    def before_instantiate_classes(self) -> None:
        """Refuse out-of-range settings (all named at once), a GPU setting on a CPU-only machine and a
        ``--ckpt_path`` that is not this model's checkpoint (before any logger, run folder or config.yaml
        exists); give every W&B logger without an ``id`` this run's."""
        try:
            check_settings(self.config)
        except ConfigError as error:
            sources = ", ".join(str(path) for path in self.config.get("config") or []) or "(command line)"
            raise ConfigError(f"{sources}: {error}") from error
        check_devices(self.config.as_dict())
        lora = self.config.model.lora
        check_checkpoint(self.config.ckpt_path, list(lora.target_modules), lora.r)
        trainer = self.config.trainer
        root = trainer.default_root_dir or "."
        for logger in _listed(trainer.logger):
            if isinstance(logger, Namespace) and logger.class_path.endswith("WandbLogger"):
                args = logger.init_args
                if args.get("id") is None:
                    args.id = stable_wandb_id(args.project, args.name, root)

    def instantiate_classes(self) -> None:
        """The settings, the run config built from them (:attr:`run`), the modules built from it, then the
        Trainer."""
        self.config_init = self.parser.instantiate_classes(self.config)
        self.run_config = run_config(self.config, self.config_init, self.config_path)
        self.model = InstructionTuner(self.run_config.model)
        self.datamodule = InstructionDataModule(self.run_config.data, self.run_config.cache_dir)
        self._add_configure_optimizers_method_to_model(self.subcommand)
        self.trainer = self.instantiate_trainer()


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def root_outputs(trainer: Namespace, root: str) -> None:
    """Loggers without a ``save_dir`` (null, or W&B's default ``.``) write under ``root``, and
    ModelCheckpoint callbacks without a ``dirpath`` under ``root/checkpoints`` (a fixed folder, so that
    ``--ckpt_path last`` finds ``last.ckpt``); paths set explicitly stay. The adapter (``<root>/adapter``)
    and the validation answers (``<W&B or CSV folder>/val_generation``) follow."""
    for logger in _listed(trainer.logger):
        if isinstance(logger, Namespace) and logger.init_args.get("save_dir") in (None, "."):
            logger.init_args.save_dir = root
    for callback in _listed(trainer.callbacks):
        if (
            isinstance(callback, Namespace)
            and callback.class_path.endswith("ModelCheckpoint")
            and callback.init_args.get("dirpath") is None
        ):
            callback.init_args.dirpath = str(Path(root) / "checkpoints")


def add_run_callbacks(trainer: Trainer) -> None:
    """A NaN step stops before any checkpoint callback saves it (first); preemption saves its HPC checkpoint
    after every ``ModelCheckpoint`` has saved for that step (last; see :class:`RequeueAtStepBoundary`).
    With the progress bar on and stderr not a terminal (a SLURM ``.out``), plain progress lines every 10
    steps or 60 s (:class:`PlainProgress`, unless ``trainer.callbacks`` lists one)."""
    trainer.callbacks.insert(0, FiniteLossGuard())
    trainer.callbacks.append(RequeueAtStepBoundary())
    listed = any(isinstance(callback, PlainProgress) for callback in trainer.callbacks)
    if trainer.progress_bar_callback is not None and not sys.stderr.isatty() and not listed:
        trainer.callbacks.append(PlainProgress())


class TrainingRan(Callback):
    """Records whether the fit loop ran: Lightning skips it, and with it the adapter export of
    ``on_train_end``, when ``max_steps`` / ``max_epochs`` / ``limit_train_batches`` leave nothing to train
    (or a resumed run is already at ``max_steps``)."""

    started = False

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.started = True


@rank_zero_only
def print_plan(plan: ModelStack) -> None:
    print(plan_text(plan), file=sys.stderr, flush=True)


def run_config(config: Namespace, settings: Namespace, config_path: Path) -> RunConfig:
    """The run config of the parsed CLI ``config``, whose sections are instantiated in ``settings``."""
    return RunConfig(
        path=config_path,
        seed_everything=config.seed_everything,
        trainer=config.trainer.as_dict(),
        cache=config.cache_dir,
        cache_max_bytes=config.cache_max_bytes,
        **{name: settings[name] for name in SETTINGS_SECTIONS},
    )


def main(argv: list[str] | None = None) -> int:
    """Train; graphctx's own errors end it with one ``error: ...`` line (``--debug``: and the traceback).
    Everything but the result goes to stderr (``--help``, ``--version`` and ``--print_config`` print to
    stdout)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_enabled("--debug" in args)
    args = [arg for arg in args if arg != "--debug"]
    quiet_third_party()
    results = sys.stdout
    informational = ("-h", "--help", "--version")
    prints_only = any(arg in informational or arg.startswith("--print_config") for arg in args)
    with contextlib.nullcontext() if prints_only else contextlib.redirect_stdout(sys.stderr):
        return report(lambda: train(args, results), debug, hint=dump_hint)


def dump_hint(error: GraphctxError) -> str | None:
    """Where to get a dump, after a data error other than an empty split."""
    return DUMP_HINT if isinstance(error, DataError) and not isinstance(error, EmptySplitError) else None


def config_files(args: list[str]) -> list[Path]:
    """The files of every ``--config PATH`` / ``--config=PATH`` in ``args``."""
    files = [Path(value) for flag, value in itertools.pairwise(args) if flag == "--config"]
    return files + [Path(arg.split("=", 1)[1]) for arg in args if arg.startswith("--config=")]


def train(args: list[str], out: TextIO) -> int:
    """Parse the config, check it, the models it names and the data, then fit and export the adapter
    (its folder is printed to ``out``)."""
    use_unique_yaml()  # a key given twice in any YAML jsonargparse reads is refused
    files = config_files(args)
    for path in files:
        check_mapping(path)  # a missing file, a list/scalar YAML, a key given twice or moved, named
    check_moved_keys({}, args)
    config_path = files[-1] if files else COMMAND_LINE
    with field_docstrings() if {"-h", "--help"} & set(args) else contextlib.nullcontext():
        cli = TrainCLI(
            InstructionTuner,
            InstructionDataModule,
            run=False,
            args=args,
            save_config_callback=LogConfigCallback,
            save_config_kwargs={"overwrite": True},
            parser_kwargs={"description": __doc__, "allow_abbrev": False},
            config_path=config_path,
        )
    add_run_callbacks(cli.trainer)
    config = cli.run_config
    plan = ModelStack(config)
    print_plan(plan)
    check_models(plan, "train")  # on every rank, before any weights load: a missing model is named
    cli.datamodule.attach_tokenizer(load_tokenizer(config.model.spec))
    cli.datamodule.setup("fit")  # data, splits and data.max_length, before any logger or run folder
    check_memory(plan.memory, "train", cli.trainer.strategy.root_device)  # and a GPU too small for it
    generation = validation_callback(config)
    for callback in cli.trainer.callbacks:
        if isinstance(callback, LogConfigCallback):
            callback.plan = plan_json(plan)
    if generation is not None:  # answers a fixed validation subset and scores it every N validations
        cli.trainer.callbacks.append(generation)
    ran = TrainingRan()
    cli.trainer.callbacks.append(ran)
    root = cli.trainer.default_root_dir
    with holding(root, "another train.py run") if launching_rank() else contextlib.nullcontext():
        try:
            cli.trainer.fit(cli.model, cli.datamodule, ckpt_path=cli.config.ckpt_path, weights_only=True)
        finally:
            finish_wandb_runs(cli.trainer)
        if cli.trainer.is_global_zero:
            adapter = exported_adapter_dir(config.model.export, root)
            report_export(ran.started, adapter, cli.trainer, out)
    return 0


def launching_rank() -> bool:
    """Whether this process is rank 0 of its run, by the variables launchers set (torchrun's ``RANK``,
    Lightning's ``LOCAL_RANK`` / ``NODE_RANK``, SLURM's ``SLURM_PROCID``): it alone holds the training root's
    lock (:mod:`graphctx.folder_lock`), which the other ranks share."""
    names = ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID")
    return all(os.environ.get(name, "0") == "0" for name in names)


def report_export(exported: bool, adapter: Path, trainer: Trainer, out: TextIO) -> None:
    """The exported adapter's folder on ``out``; or one warning line when no training ran, so no adapter
    was exported (a later evaluate.py would use whatever ``adapter`` holds)."""
    if exported:
        print(adapter, file=out)
        return
    held = "holds an adapter of an earlier run" if adapter.is_dir() else "does not exist"
    print(
        f"warning: no training step ran (trainer.max_steps {trainer.max_steps}, global step "
        f"{trainer.global_step}), so no adapter was exported; {adapter} {held}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(main())
