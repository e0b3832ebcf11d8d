"""The micro-training models, in plain torch (no torchvision), for 1x28x28 inputs.

Imported only in child processes: importing torch can kill a process with
SIGILL on a CPU that lacks the ISA the build needs.
"""

from __future__ import annotations

import torch
from torch import nn


class SimpleCNN(nn.Module):
    """The popular guide's model, made to run: conv 1->32 3x3, ReLU, 2x2 max-pool, linear 32*13*13->10.

    Without the pool (as the guide prints it) the linear layer would get
    32*26*26 features and the forward pass fails with a shape error.
    """

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, kernel_size=3)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 13 * 13, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv(x)))
        return self.fc(torch.flatten(x, 1))


class LeNet5(nn.Module):
    """LeNet-5 (LeCun et al. 1998) for 28x28: the first conv pads by 2 to get the 32x32 field."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.Tanh(), nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * 5 * 5, 120), nn.Tanh(),
            nn.Linear(120, 84), nn.Tanh(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inp: int, out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or inp != out:
            self.shortcut = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016) adapted to 1x28x28: a 3x3 stem without max-pool, then 4 stages of 2 blocks.

    Widths 64/128/256/512 as in the original give ~11.2M parameters.
    """

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True))
        layers: list[nn.Module] = []
        inp = 64
        for out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(inp, out, stride), BasicBlock(out, out, 1)]
            inp = out
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


MODEL_CLASSES: dict[str, type[nn.Module]] = {"simplecnn": SimpleCNN, "lenet5": LeNet5, "resnet18": ResNet18}


def build_model(name: str, num_classes: int = 10) -> nn.Module:
    try:
        cls = MODEL_CLASSES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_CLASSES)}") from None
    return cls(num_classes)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
