"""Small real models the capture tests train on CPU."""

from __future__ import annotations

import torch
import torch.nn as nn


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class SmallTransformer(nn.Module):
    def __init__(self, d_model: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=128, batch_first=True, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, 100)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)))


def batch_for(name: str) -> tuple:
    g = torch.Generator().manual_seed(0)
    if name == "mlp":
        return torch.randn(32, 64, generator=g), torch.randint(0, 10, (32,), generator=g)
    if name == "cnn":
        return torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)
    tokens = torch.randint(0, 100, (4, 16), generator=g)
    return tokens, torch.randint(0, 100, (4, 16), generator=g)


def build(name: str) -> nn.Module:
    torch.manual_seed(0)
    return {"mlp": mlp, "cnn": SmallCNN, "transformer": SmallTransformer}[name]()


def loss_for(name: str):
    if name == "transformer":
        return lambda out, target: nn.functional.cross_entropy(out.reshape(-1, 100), target.reshape(-1))
    return nn.CrossEntropyLoss()


def train_under(prof, model: nn.Module, opt, steps: int, name: str = "mlp") -> None:
    """``steps`` training steps of ``model`` (the harness's ``name``) on its
    batch with ``opt`` inside ``with prof:``, each ended by ``prof.step()``."""
    inputs, target = batch_for(name)
    loss = loss_for(name)
    with prof:
        for _ in range(steps):
            opt.zero_grad()
            loss(model(inputs), target).backward()
            opt.step()
            prof.step()

