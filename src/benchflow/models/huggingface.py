"""suite=huggingface: a transformers model built offline from its config class, with
inputs made as PyTorch's benchmarks/dynamo/huggingface.py makes them.

The model is ``<Class>(<Class>.config_class())``: default configuration, random weights,
nothing downloaded (benchflow.models.hub). Its inputs always include the labels, as the
runner's do, so the forward also computes the loss it trains on (docs/huggingface-timm.md).
"""

from __future__ import annotations

import importlib
from operator import itemgetter
from typing import Any

import torch

from benchflow.config.schema import BenchConfig
from benchflow.models.errors import ModelSkipped
from benchflow.models.held import DEFAULT_BATCH_SIZE, HeldModel
from benchflow.models.hub import needs_download

# Sequence length by the model name's prefix, first match wins; 128 otherwise.
SEQUENCE_LENGTHS = (
    (("Blenderbot",), 128),
    (("GPT2", "Bart", "T5", "PLBart", "MBart", "AllenaiLongformerBase"), 1024),
    (("OPT",), 2048),
    (("Reformer",), 4096),
    (
        ("Albert", "Deberta", "Layout", "Electra", "XLNet", "MegatronBert", "Bert", "Roberta"),
        512,
    ),
    (("DistillGPT2", "GoogleFnet", "YituTechConvBert"), 512),
    (("TrOCRForCausalLM",), 256),
    (("MobileBert",), 128),
)
DEFAULT_SEQUENCE_LENGTH = 128
# Need a pad token for batches larger than one (the runner sets 0).
PAD_TOKEN_PREFIXES = (
    "GPT2ForSequenceClassification",
    "GPTNeoForSequenceClassification",
    "GPTJForSequenceClassification",
    "Roberta",
    "Marian",
)
DECODER_INPUT_PREFIXES = ("T5", "M2M100", "MT5")


def sequence_length(name: str) -> int:
    for prefixes, length in SEQUENCE_LENGTHS:
        if name.startswith(prefixes):
            return length
    return DEFAULT_SEQUENCE_LENGTH


def _randint(high: int, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randint(0, high, shape, dtype=torch.int64)


def labels(name: str, config: Any, batch: int, seq: int) -> dict[str, torch.Tensor]:
    """The loss arguments the class name asks for."""
    vocab = config.vocab_size
    if name.endswith("QuestionAnswering"):
        return {
            "start_positions": _randint(seq, (batch,)),
            "end_positions": _randint(seq, (batch,)),
        }
    if name.endswith(("MaskedLM", "HeadModel", "CausalLM", "DoubleHeadsModel")):
        return {"labels": _randint(vocab, (batch, seq))}
    if name.endswith("SequenceClassification"):
        return {"labels": _randint(config.num_labels - 1, (batch,))}
    if name.endswith("ForConditionalGeneration"):
        return {"labels": _randint(vocab - 1, (batch, seq))}
    raise ModelSkipped(f"{name}: no training labels are defined for this kind of model")


def make_inputs(name: str, config: Any, batch: int) -> dict[str, torch.Tensor]:
    seq = sequence_length(name)
    high = 1 if name.startswith("Roberta") else config.vocab_size
    input_ids = _randint(high, (batch, seq))
    if "Bart" in name:
        input_ids[:, -1] = config.eos_token_id
    inputs = {"input_ids": input_ids}
    if name.startswith(DECODER_INPUT_PREFIXES):
        inputs["decoder_input_ids"] = input_ids
    return inputs | labels(name, config, batch, seq)


def build_module(name: str) -> torch.nn.Module:
    why = needs_download(name)
    if why:
        raise ModelSkipped(why)
    transformers = importlib.import_module("transformers")
    cls = getattr(transformers, name, None)
    if cls is None or not hasattr(cls, "config_class"):
        raise ModelSkipped(f"transformers {transformers.__version__} has no model class {name}")
    config = cls.config_class()
    if name.startswith(PAD_TOKEN_PREFIXES):
        config.pad_token_id = 0
    module = cls(config)
    if hasattr(module.config, "use_cache"):
        module.config.use_cache = False
    return module  # type: ignore[no-any-return]


def load(cfg: BenchConfig) -> HeldModel:
    """The job's model as built, in float32 (HeldModel.place casts and moves it)."""
    name = cfg.model.name
    module = build_module(name)
    batch = cfg.batch_size or DEFAULT_BATCH_SIZE
    inputs = make_inputs(name, module.config, batch)
    # the runner's training loss: the model's first output (its loss, given labels)
    return HeldModel(name, cfg.test.name, module, inputs, itemgetter(0), batch)
