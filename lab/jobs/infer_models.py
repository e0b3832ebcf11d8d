"""The inference lab's built-in models, in plain torch (no torchvision, which does not import beside torch 2.13).

For people without a model of their own: a ResNet-18 as torchvision builds it for ImageNet (3x224x224
images, 1000 classes; convolution-heavy, so channels_last and bf16 matter), and a small transformer encoder
over 128 tokens (matrix multiplies and attention, so int8 and the fused inference path matter). Weights are
random (seeded): latency does not depend on them, and the accuracy check compares each variant with fp32 on
the same weights.

Imported only in child processes.
"""

from __future__ import annotations

from typing import Any, Callable, Tuple

import torch
from torch import nn

if __package__:
    from .models import BasicBlock
else:
    from models import BasicBlock


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016) for 3x224x224 images: a 7x7 stride-2 stem and max-pool, 4 stages of 2 blocks."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        layers = []
        inp = 64
        for out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(inp, out, stride), BasicBlock(out, out, 1)]
            inp = out
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


class TransformerClassifier(nn.Module):
    """Token ids -> embedding + learned positions -> nn.TransformerEncoder (4 layers, width 256, 4 heads) -> mean
    pool -> 2 classes: a small text classifier of the BERT-mini kind."""

    def __init__(self, vocab: int = 8000, width: int = 256, heads: int = 4, layers: int = 4, tokens: int = 128,
                 num_classes: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(1, tokens, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=4 * width, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, num_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) + self.position[:, : ids.shape[1]]
        return self.head(self.encoder(x).mean(dim=1))


VOCAB = 8000
TOKENS = 128


def build(name: str) -> Tuple[nn.Module, Callable[[int], Any]]:
    """The model in eval mode and a function giving a deterministic input batch of a given size."""
    if name == "resnet18":
        def images(batch: int) -> torch.Tensor:
            return torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(1234))

        return ResNet18().eval(), images
    if name == "transformer":
        def ids(batch: int) -> torch.Tensor:
            return torch.randint(0, VOCAB, (batch, TOKENS), generator=torch.Generator().manual_seed(1234))

        return TransformerClassifier(VOCAB, tokens=TOKENS).eval(), ids
    raise ValueError(f"unknown built-in model {name!r}; known: resnet18, transformer")
