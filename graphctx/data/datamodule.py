"""The LightningDataModule of instruction tuning: Q&A rows -> tokenised, length-grouped or packed batches."""

from __future__ import annotations

from typing import Any, ClassVar

import lightning as L
from torch.utils.data import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader
from transformers import PreTrainedTokenizerBase

from graphctx.checks import AT_LEAST_ONE, NON_NEGATIVE, Range
from graphctx.data.build import load_qa_dataset
from graphctx.data.instruct import encode_example, get_template
from graphctx.data.packing import BatchLayout, collate_rows, layout_batches
from graphctx.data.settings import DatasetSettings


class BatchDataset(Dataset):
    """A map-style dataset whose items are whole batches (lists of rows of encoded examples).

    Items being batches lets Lightning's DistributedSampler deal batches to ranks, and the stateful loader
    record how far an epoch got, so a resumed run continues at the same data position.
    """

    def __init__(self, examples: list[dict[str, list[int]]], layout: BatchLayout) -> None:
        self.examples = examples
        self.layout = layout

    def __len__(self) -> int:
        return len(self.layout)

    def __getitem__(self, index: int) -> list[list[dict[str, list[int]]]]:
        return [[self.examples[i] for i in row] for row in self.layout[index]]


class InstructionDataModule(L.LightningDataModule):
    """Instruction-tuning batches from the Q&A dataset (train and validation splits).

    The tokenizer is the model's: call :meth:`attach_tokenizer` before ``setup`` (train.py does).
    """

    RANGES: ClassVar[dict[str, Range]] = {
        "max_length": AT_LEAST_ONE,
        "min_prompt_tokens": NON_NEGATIVE,
        "batch_size": AT_LEAST_ONE,
        "num_workers": NON_NEGATIVE,
    }

    def __init__(
        self,
        dataset: DatasetSettings,
        template: str = "paper",
        max_length: int = 1024,
        min_prompt_tokens: int = 64,
        batch_size: int = 4,
        pack: bool = True,
        num_workers: int = 0,
        seed: int = 0,
        cache_dir: str | None = None,
    ) -> None:
        """
        Args:
            dataset: where the Q&A pairs come from and how they are filtered and split.
            template: instruction format, ``paper`` (``[INST]q[\\INST]Answer:a``) or ``llama2-chat``.
            max_length: tokens per example (and per packed row); longer examples are truncated.
            min_prompt_tokens: the question is cut to this many tokens before the answer is cut.
            batch_size: rows per batch (examples when unpacked; packed rows of ``max_length`` when packed).
            pack: pack several examples into each row (no pad compute, no cross-example attention).
            num_workers: DataLoader worker processes.
            seed: seed of the batch order.
            cache_dir: graphctx cache folder (default ``$GRAPHCTX_CACHE`` or ``.cache/graphctx``).
        """
        super().__init__()
        self.dataset = dataset
        self.template = get_template(template)
        self.max_length = max_length
        self.min_prompt_tokens = min_prompt_tokens
        self.batch_size = batch_size
        self.pack = pack
        self.num_workers = num_workers
        self.seed = seed
        self.cache_dir = cache_dir
        self.tokenizer: PreTrainedTokenizerBase | None = None
        self.splits: dict[str, BatchDataset] = {}

    def attach_tokenizer(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Use the model's tokenizer for the token-length filter and for encoding."""
        self.tokenizer = tokenizer

    def setup(self, stage: str | None = None) -> None:
        """Load (or build) the dataset; encode the train and validation splits and lay out their batches."""
        if self.tokenizer is None:
            raise RuntimeError(
                "InstructionDataModule needs the model's tokenizer: call attach_tokenizer() first"
            )
        if self.splits:
            return
        qa = load_qa_dataset(self.dataset, self.cache_dir, self.tokenizer)
        for split in ("train", "validation"):
            examples = [self._encode(row) for row in qa[split]]
            lengths = [len(example["input_ids"]) for example in examples]
            layout = layout_batches(lengths, self.batch_size, self.pack, self.max_length, self.seed)
            self.splits[split] = BatchDataset(examples, layout)

    def _encode(self, row: dict[str, Any]) -> dict[str, list[int]]:
        return encode_example(
            self.tokenizer,
            self.template,
            row["question"],
            row["answer"],
            self.max_length,
            self.min_prompt_tokens,
        )

    def _loader(self, split: str, shuffle: bool) -> StatefulDataLoader:
        pad_id = self.tokenizer.pad_token_id
        pad_id = self.tokenizer.eos_token_id if pad_id is None else pad_id
        return StatefulDataLoader(
            self.splits[split],
            batch_size=1,
            shuffle=shuffle,
            num_workers=self.num_workers,
            collate_fn=_Collate(pad_id, self.pack),
        )

    def train_dataloader(self) -> StatefulDataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> StatefulDataLoader:
        return self._loader("validation", shuffle=False)


class _Collate:
    """Picklable collate for worker processes: one laid-out batch -> tensors."""

    def __init__(self, pad_id: int, packed: bool) -> None:
        self.pad_id = pad_id
        self.packed = packed

    def __call__(self, items: list[list[list[dict[str, list[int]]]]]) -> dict:
        (rows,) = items
        return collate_rows(rows, self.pad_id, self.packed)
