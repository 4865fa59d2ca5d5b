"""Which suite models cannot be built offline, importable without torch.

benchflow never downloads anything; PyTorch's huggingface.py fetches a few
configurations from the Hub and its LLM entries (`meta-llama/...`) load a checkpoint,
so those cannot run here: `benchflow models` lists them, the child skips them.
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
