"""The shapes of the models in :data:`~graphctx.stack.model_shapes.KNOWN_CONFIGS` (the packaged stand-ins
and the paper"s), counted once on the meta device and kept as numbers, so a plan of the paper"s configs needs
no torch or transformers; tests/test_memory.py recounts every entry (:func:`shape_of`) and asserts equality.
A local folder, the tiny random model or any other id is counted when asked (:func:`source_shape`)."""

from __future__ import annotations

from pathlib import Path

from graphctx.model.settings import SMOLLM2_GGUF, TinyLlamaSettings
from graphctx.retrieval.settings import PACKAGED_MINILM
from graphctx.stack.model_shapes import Shape, model_config, shape_of

KNOWN_SHAPES: dict[str, Shape] = {
    SMOLLM2_GGUF: Shape(
        params=134515008,
        linear=106168320,
        layers=30,
        kv_width=192,
        hidden=576,
        intermediate=1536,
        vocab=49152,
        lora_widths={
            "q_proj": (576, 576),
            "k_proj": (576, 192),
            "v_proj": (576, 192),
            "o_proj": (576, 576),
            "gate_proj": (576, 1536),
            "up_proj": (576, 1536),
            "down_proj": (1536, 576),
        },
    ),
    PACKAGED_MINILM: Shape(
        params=22713216,
        linear=10764288,
        layers=6,
        kv_width=384,
        hidden=384,
        intermediate=1536,
        vocab=30522,
        lora_widths={"query": (384, 384), "key": (384, 384), "value": (384, 384), "dense": (384, 384)},
    ),
    "meta-llama/Llama-2-7b-hf": Shape(
        params=6738415616,
        linear=6476005376,
        layers=32,
        kv_width=4096,
        hidden=4096,
        intermediate=11008,
        vocab=32000,
        lora_widths={
            "q_proj": (4096, 4096),
            "k_proj": (4096, 4096),
            "v_proj": (4096, 4096),
            "o_proj": (4096, 4096),
            "gate_proj": (4096, 11008),
            "up_proj": (4096, 11008),
            "down_proj": (11008, 4096),
        },
    ),
    "meta-llama/Llama-2-13b-hf": Shape(
        params=13015864320,
        linear=12687769600,
        layers=40,
        kv_width=5120,
        hidden=5120,
        intermediate=13824,
        vocab=32000,
        lora_widths={
            "q_proj": (5120, 5120),
            "k_proj": (5120, 5120),
            "v_proj": (5120, 5120),
            "o_proj": (5120, 5120),
            "gate_proj": (5120, 13824),
            "up_proj": (5120, 13824),
            "down_proj": (13824, 5120),
        },
    ),
    "BAAI/bge-large-en": Shape(
        params=335141888,
        linear=303038464,
        layers=24,
        kv_width=1024,
        hidden=1024,
        intermediate=4096,
        vocab=30522,
        lora_widths={
            "query": (1024, 1024),
            "key": (1024, 1024),
            "value": (1024, 1024),
            "dense": (1024, 1024),
        },
    ),
    "Babelscape/rebel-large": Shape(
        params=406298624,
        linear=352321536,
        layers=12,
        kv_width=1024,
        hidden=1024,
        intermediate=0,
        vocab=50272,
        lora_widths={
            "k_proj": (1024, 1024),
            "v_proj": (1024, 1024),
            "q_proj": (1024, 1024),
            "out_proj": (1024, 1024),
            "fc1": (1024, 4096),
            "fc2": (4096, 1024),
        },
    ),
    "roberta-large": Shape(
        params=355359744,
        linear=303038464,
        layers=24,
        kv_width=1024,
        hidden=1024,
        intermediate=4096,
        vocab=50265,
        lora_widths={
            "query": (1024, 1024),
            "key": (1024, 1024),
            "value": (1024, 1024),
            "dense": (1024, 1024),
        },
    ),
    "google/t5_xxl_true_nli_mixture": Shape(
        params=11003736064,
        linear=10871635968,
        layers=24,
        kv_width=4096,
        hidden=4096,
        intermediate=0,
        vocab=32128,
        lora_widths={
            "q": (4096, 4096),
            "k": (4096, 4096),
            "v": (4096, 4096),
            "o": (4096, 4096),
            "wi_0": (4096, 10240),
            "wi_1": (4096, 10240),
            "wo": (10240, 4096),
        },
    ),
    "tner/deberta-v3-large-ontonotes5": Shape(
        params=434010112,
        linear=301989888,
        layers=24,
        kv_width=1024,
        hidden=1024,
        intermediate=4096,
        vocab=128100,
        lora_widths={
            "query_proj": (1024, 1024),
            "key_proj": (1024, 1024),
            "value_proj": (1024, 1024),
            "dense": (1024, 1024),
        },
    ),
    "studio-ousia/luke-large-finetuned-tacred": Shape(
        params=559722496,
        linear=378798080,
        layers=24,
        kv_width=1024,
        hidden=1024,
        intermediate=4096,
        vocab=50267,
        lora_widths={
            "entity_embedding_dense": (256, 1024),
            "query": (1024, 1024),
            "key": (1024, 1024),
            "value": (1024, 1024),
            "w2e_query": (1024, 1024),
            "e2w_query": (1024, 1024),
            "e2e_query": (1024, 1024),
            "dense": (1024, 1024),
        },
    ),
}
KNOWN_SHAPES["Universal-NER/UniNER-7B-type"] = KNOWN_SHAPES["meta-llama/Llama-2-7b-hf"]
"""UniversalNER-7B has Llama-2-7B"s shape (see ``KNOWN_CONFIGS``)."""


def source_shape(source: str, tiny: TinyLlamaSettings | None = None) -> Shape | None:
    """The shape of ``source``: from :data:`KNOWN_SHAPES` for a known id that is no local folder, else
    counted on the meta device (None when its config is unknown); ``tiny``: the shape ``tiny-random``
    stands for."""
    local = (Path(source).expanduser() / "config.json").is_file()
    if source in KNOWN_SHAPES and not local:
        return KNOWN_SHAPES[source]
    found = model_config(source, tiny)
    return shape_of(found) if found is not None else None
