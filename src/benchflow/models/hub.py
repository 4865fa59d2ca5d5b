"""Which suite models cannot be built offline, importable without torch.

benchflow builds huggingface and timm models from their configurations with random
weights and never downloads anything. PyTorch's huggingface.py fetches a few
configurations from the Hugging Face Hub instead of using a config class's
defaults, and its LLM entries (names with an owner, `meta-llama/...`) load a
checkpoint: those cannot run here. The parent lists them (`benchflow models`), the
child skips them naming the download.
"""

from __future__ import annotations

# model name -> the Hub repository PyTorch's runner reads its configuration from
HUB_CONFIGS = {
    "AllenaiLongformerBase": "allenai/longformer-base-4096",
    "T5Small": "t5-small",
    "DistillGPT2": "distilgpt2",
    "GoogleFnet": "google/fnet-base",
    "YituTechConvBert": "YituTech/conv-bert-base",
    "CamemBert": "camembert-base",
}


def needs_download(name: str) -> str | None:
    """Why the model cannot be built offline, or None."""
    if "/" in name:
        return f"{name} is loaded from its Hugging Face Hub checkpoint; benchflow never downloads"
    repo = HUB_CONFIGS.get(name)
    if repo:
        return (
            f"{name}'s configuration comes from the Hugging Face Hub ({repo}); "
            "benchflow never downloads"
        )
    return None
