"""The optimiser step's gradient is that of the mean over all its answer tokens (accumulation, DDP ranks)."""

from __future__ import annotations

import os
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.fabric.plugins.environments.lightning import find_free_network_port
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader

from graphctx.data.instruct import encode_example, get_template
from graphctx.data.packing import collate_rows
from graphctx.model import InstructionTuner, LoraSettings, ModelSpec, TunerSettings, load_tokenizer
from tests.forked_ranks import run_forked_ranks

SHORT = ("Is ADA a token?", "Yes.")
LONG = [
    (
        "How do I delegate my ADA to a stake pool?",
        "Open your wallet, pick a pool from the list, check its fee and margin, then confirm the delegation "
        "transaction; the stake moves with your funds and rewards arrive every epoch after two epochs.",
    ),
    (
        "What is a UTXO?",
        "An unspent transaction output: a coin of a given value locked by an address that a later "
        "transaction can spend exactly once, consuming it whole and creating new outputs as change.",
    ),
    (
        "Which port does cardano-node listen on?",
        "3001 by default; set it with --port, open it in the firewall for incoming peers, and list the "
        "relays in the topology file so that the block producer only talks to your own relays.",
    ),
]


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> ModelSpec:
    """A tiny random Llama with a float32 LoRA base, so gradients compare to float tolerance."""
    cache = tmp_path_factory.mktemp("model-cache")
    return ModelSpec(source="tiny-random", quantization="none", compute_dtype="float32", cache_dir=str(cache))


@pytest.fixture(scope="module")
def micro_batches(spec: ModelSpec) -> list[dict[str, torch.Tensor]]:
    """Four packed micro-batches: one with a few answer tokens, three with many."""
    tokenizer = load_tokenizer(spec)
    template = get_template("paper")

    def encode(pair: tuple[str, str]) -> dict[str, list[int]]:
        return encode_example(tokenizer, template, *pair, max_length=256)

    rows = [[[encode(SHORT)]], [[encode(LONG[0]), encode(LONG[1])]], [[encode(LONG[2])]], [[encode(LONG[1])]]]
    return [collate_rows(row, pad_id=0, packed=True) for row in rows]


def answer_tokens(batch: dict[str, torch.Tensor]) -> int:
    return int((batch["labels"][:, 1:] != -100).sum())


def union(batches: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """One packed batch holding every row of ``batches`` (right-padded with a pad segment)."""
    width = max(batch["input_ids"].shape[1] for batch in batches)
    parts: dict[str, list[torch.Tensor]] = {"input_ids": [], "labels": [], "position_ids": []}
    for batch in batches:
        extra = width - batch["input_ids"].shape[1]
        parts["input_ids"].append(torch.nn.functional.pad(batch["input_ids"], (0, extra), value=0))
        parts["labels"].append(torch.nn.functional.pad(batch["labels"], (0, extra), value=-100))
        tail = torch.arange(extra).expand(batch["input_ids"].shape[0], extra)
        parts["position_ids"].append(torch.cat([batch["position_ids"], tail], dim=1))
    return {name: torch.cat(tensors) for name, tensors in parts.items()}


def seeded_tuner(spec: ModelSpec) -> InstructionTuner:
    """The same adapter every call, with a non-zero B so that every adapter matrix gets a gradient."""
    torch.manual_seed(0)
    module = InstructionTuner(TunerSettings(spec=spec, lora=LoraSettings(r=8, alpha=16, dropout=0.0)))
    module.configure_model()
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.02)
    return module


def adapter_gradients(module: InstructionTuner) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.requires_grad}


def one_batch_reference(spec: ModelSpec, batches: list[dict[str, torch.Tensor]]):
    """Gradients and loss of the mean over all answer tokens of ``batches``, as one batch."""
    module = seeded_tuner(spec)
    loss = module(union(batches))
    loss.backward()
    return adapter_gradients(module), loss.detach()


class KeepStepGradients(L.Callback):
    """After the optimiser step: the gradients it used (Lightning zeroes them only at the next step)."""

    def __init__(self, out: Path | None = None) -> None:
        self.out, self.gradients = out, None

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == 1 and self.gradients is None:
            self.gradients = adapter_gradients(module)
            if self.out is not None:
                torch.save(
                    {"gradients": self.gradients, "loss": trainer.callback_metrics["train/loss"]},
                    self.out / f"rank{trainer.global_rank}.pt",
                )


def make_trainer(root: Path, callback: L.Callback, **options) -> L.Trainer:
    return L.Trainer(
        accelerator="cpu",
        max_steps=1,
        default_root_dir=root,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[callback],
        **options,
    )


def test_accumulated_micro_batches_give_the_one_batch_gradient(spec, micro_batches, tmp_path) -> None:
    pair = micro_batches[:2]
    assert answer_tokens(pair[1]) > 20 * answer_tokens(pair[0])  # a mean per micro-batch would differ
    expected, expected_loss = one_batch_reference(spec, pair)

    module = seeded_tuner(spec)
    keep = KeepStepGradients()
    make_trainer(tmp_path, keep, accumulate_grad_batches=2).fit(module, DataLoader(pair, batch_size=None))

    assert keep.gradients.keys() == expected.keys()
    for name, gradient in expected.items():
        torch.testing.assert_close(keep.gradients[name], gradient, rtol=1e-4, atol=1e-7, msg=name)
    torch.testing.assert_close(module.trainer.callback_metrics["train/loss"], expected_loss)


def test_validation_loss_is_token_weighted_across_batches(spec, micro_batches, tmp_path) -> None:
    module = seeded_tuner(spec)
    module.eval()
    with torch.no_grad():
        expected = module(union(micro_batches[:2]))
    trainer = make_trainer(tmp_path, L.Callback())
    (metrics,) = trainer.validate(module, DataLoader(micro_batches[:2], batch_size=None), verbose=False)
    assert metrics["val/loss"] == pytest.approx(float(expected), rel=1e-5)


def _ddp_rank(rank: int, port: int, spec: ModelSpec, micro_batches, out: Path) -> None:
    """One rank, launched as torchrun would (Lightning then starts no processes of its own)."""
    os.environ |= {
        "LOCAL_RANK": str(rank),
        "NODE_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }
    torch.set_num_threads(1)  # forked from a process that used OpenMP threads
    module = seeded_tuner(spec)
    trainer = make_trainer(
        out,
        KeepStepGradients(out),
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo"),
        accumulate_grad_batches=2,
        limit_val_batches=1,
    )
    trainer.fit(
        module,
        DataLoader(micro_batches, batch_size=None),  # the distributed sampler: rank r gets r and r + 2
        DataLoader(micro_batches[:2], batch_size=None),  # one validation batch per rank
    )
    torch.save(trainer.callback_metrics["val/loss"], out / f"val{rank}.pt")


def test_two_process_ddp_step_equals_one_process_step_on_all_data(spec, micro_batches, tmp_path) -> None:
    """Rank 0 accumulates micro-batches 0 and 2, rank 1 micro-batches 1 and 3 (few vs many tokens)."""
    counts = [answer_tokens(batch) for batch in micro_batches]
    assert counts[0] + counts[2] < counts[1] + counts[3]
    expected, expected_loss = one_batch_reference(spec, micro_batches)
    module = seeded_tuner(spec)
    module.eval()
    with torch.no_grad():  # lr warm-up starts at 0: validation after the step sees these weights
        expected_val = module(union(micro_batches[:2]))

    port = find_free_network_port()
    # the forked ranks inherit the built model cache and the data
    rank_args = [(rank, port, spec, micro_batches, tmp_path) for rank in (0, 1)]
    assert run_forked_ranks(_ddp_rank, rank_args, timeout_s=180) == [0, 0]

    for rank in (0, 1):
        saved = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        for name, gradient in expected.items():
            torch.testing.assert_close(saved["gradients"][name], gradient, rtol=1e-4, atol=1e-7, msg=name)
        torch.testing.assert_close(saved["loss"], expected_loss)
        val = torch.load(tmp_path / f"val{rank}.pt", weights_only=True)
        assert float(val) == pytest.approx(float(expected_val), rel=1e-5)
