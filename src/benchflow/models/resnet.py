"""Small ResNet: stem, stages of BasicBlocks with BatchNorm and projection shortcuts."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from benchflow.models.base import BenchModel


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNetNet(nn.Module):
    def __init__(self, widths: list[int], blocks: list[int], image: int, classes: int) -> None:
        super().__init__()
        self.image = image
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()
        )
        layers: list[nn.Module] = []
        cin = widths[0]
        for stage, (width, count) in enumerate(zip(widths, blocks, strict=True)):
            for i in range(count):
                layers.append(BasicBlock(cin, width, 2 if stage > 0 and i == 0 else 1))
                cin = width
        self.stages = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(images))
        return self.fc(x.mean(dim=(2, 3)))


class ResNet(BenchModel):
    DEFAULT_TRAIN_BSIZE = 16
    DEFAULT_EVAL_BSIZE = 16
    SIZES = {
        "tiny": dict(widths=[8, 16], blocks=[1, 1], image=16, classes=10),
        "small": dict(widths=[16, 32, 64], blocks=[1, 1, 1], image=32, classes=10),
        "base": dict(widths=[64, 128, 256, 512], blocks=[2, 2, 2, 2], image=64, classes=100),
        # ResNet-18's stages at ImageNet resolution.
        "large": dict(widths=[64, 128, 256, 512], blocks=[2, 2, 2, 2], image=224, classes=1000),
    }

    def build_module(self, *args: Any, **hp: Any) -> nn.Module:
        return ResNetNet(**hp)

    def make_inputs(self, module: nn.Module, batch_size: int) -> tuple[Any, ...]:
        assert isinstance(module, ResNetNet)
        return (torch.randn(batch_size, 3, module.image, module.image),)

    def loss(self, outputs: Any) -> torch.Tensor:
        labels = torch.arange(outputs.shape[0], device=outputs.device) % outputs.shape[1]
        return nn.functional.cross_entropy(outputs.float(), labels)
