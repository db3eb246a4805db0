"""The LightningDataModule of instruction tuning: Q&A rows -> tokenised, length-grouped or packed batches."""

from __future__ import annotations

from typing import Any

import lightning as L
from torch.utils.data import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader
from transformers import PreTrainedTokenizerBase

from graphctx.data.build import load_qa_dataset
from graphctx.data.instruct import encode_example, get_template
from graphctx.data.packing import EpochBatches, collate_rows, epoch_batches
from graphctx.data.settings import DataModuleSettings


class BatchDataset(Dataset):
    """A map-style dataset whose items are whole batches (lists of rows of encoded examples).

    Items being batches lets Lightning's DistributedSampler deal batches to ranks, and the stateful loader
    record how far an epoch got, so a resumed run continues at the same data position.
    """

    def __init__(self, examples: list[dict[str, list[int]]], batches: EpochBatches) -> None:
        self.examples = examples
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> list[list[dict[str, list[int]]]]:
        return [[self.examples[i] for i in row] for row in self.batches[index]]


class InstructionDataModule(L.LightningDataModule):
    """Instruction-tuning batches from the Q&A dataset (train and validation splits), built from the
    ``data`` section's :class:`~graphctx.data.settings.DataModuleSettings`.

    The tokenizer is the model's: call :meth:`attach_tokenizer` before ``setup`` (train.py does).
    """

    def __init__(self, settings: DataModuleSettings, cache_dir: str | None = None) -> None:
        """``cache_dir``: the graphctx cache folder (None: ``$GRAPHCTX_CACHE`` or ``.cache/graphctx``)."""
        super().__init__()
        self.settings = settings
        self.template = get_template(settings.template)
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
        qa = load_qa_dataset(self.settings.dataset, self.cache_dir, self.tokenizer)
        for split in ("train", "validation"):
            examples = [self._encode(row) for row in qa[split]]
            lengths = [len(example["input_ids"]) for example in examples]
            settings = self.settings
            batches = epoch_batches(
                lengths, settings.batch_size, settings.pack, settings.max_length, settings.seed
            )
            self.splits[split] = BatchDataset(examples, batches)

    def _encode(self, row: dict[str, Any]) -> dict[str, list[int]]:
        return encode_example(
            self.tokenizer,
            self.template,
            row["question"],
            row["answer"],
            self.settings.max_length,
            self.settings.min_prompt_tokens,
        )

    def _loader(self, split: str, shuffle: bool) -> StatefulDataLoader:
        pad_id = self.tokenizer.pad_token_id
        pad_id = self.tokenizer.eos_token_id if pad_id is None else pad_id
        return StatefulDataLoader(
            self.splits[split],
            batch_size=1,
            shuffle=shuffle,
            num_workers=self.settings.num_workers,
            collate_fn=_Collate(pad_id, self.settings.pack),
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
