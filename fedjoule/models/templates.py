"""Model templates: plain torch modules built from a scenario's `model:` section."""

import math

from torch import nn

from fedjoule.errors import FedjouleError


def logistic(input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    """Multinomial logistic (softmax) regression."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), n_classes))


def mlp(input_shape: tuple[int, ...], n_classes: int, hidden: list[int]) -> nn.Module:
    """Fully connected ReLU network, e.g. 784-200-200-10 (McMahan et al. 2017)."""
    layers: list[nn.Module] = [nn.Flatten()]
    width = math.prod(input_shape)
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, n_classes))
    return nn.Sequential(*layers)


def cnn(input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    """The MNIST CNN of McMahan et al. 2017: conv5x5(32), pool, conv5x5(64), pool, FC 512."""
    if len(input_shape) != 3:
        raise FedjouleError(
            f"model 'cnn' needs image input (channels, height, width), got shape {input_shape}"
        )
    channels, height, width = input_shape
    flat = 64 * (height // 4) * (width // 4)
    return nn.Sequential(
        nn.Conv2d(channels, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, 512),
        nn.ReLU(),
        nn.Linear(512, n_classes),
    )


def resnet18(
    input_shape: tuple[int, ...],
    n_classes: int,
    norm: str = "group",
    norm_groups: int = 2,
    width: int = 64,
) -> nn.Module:
    """CIFAR-style ResNet-18 (He et al. 2016, with the 3x3 stride-1 stem and no max-pool used
    for 32x32 images): four stages of two basic blocks with width, 2, 4 and 8 times width
    channels (strides 1, 2, 2, 2), 1x1 projection shortcuts where the shape changes, global
    average pooling and a linear head. `norm`: group (GroupNorm(norm_groups, C), FedDC's
    choice), batch (BatchNorm2d) or none (convolutions with a bias instead)."""
    if len(input_shape) != 3:
        raise FedjouleError(
            f"model 'resnet18' needs image input (channels, height, width), got shape {input_shape}"
        )
    if norm not in ("group", "batch", "none"):
        raise FedjouleError(f"resnet18: norm must be group, batch or none, not {norm!r}")
    if norm == "group" and width % norm_groups:
        raise FedjouleError(
            f"resnet18: norm_groups {norm_groups} must divide the channels of every stage "
            f"({width}, {2 * width}, {4 * width}, {8 * width}); choose a width that is a "
            "multiple of it"
        )
    return ResNet18(input_shape[0], n_classes, norm, norm_groups, width)


def _norm_layer(norm: str, groups: int, channels: int) -> nn.Module:
    if norm == "group":
        return nn.GroupNorm(groups, channels)
    if norm == "batch":
        return nn.BatchNorm2d(channels)
    return nn.Identity()


class BasicBlock(nn.Module):
    """Two 3x3 convolutions, each followed by a norm, with a residual connection (a 1x1
    convolution and norm when the stride or the channel count changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int, norm: str, groups: int) -> None:
        super().__init__()
        bias = norm == "none"
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=bias)
        self.norm1 = _norm_layer(norm, groups, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=bias)
        self.norm2 = _norm_layer(norm, groups, c_out)
        self.relu = nn.ReLU()
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=bias),
                _norm_layer(norm, groups, c_out),
            )

    def forward(self, x):
        out = self.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    """See `resnet18`. Layers are named conv1, norm1, layer1..layer4 (each two blocks:
    layer3.0.conv1, ...), pool, flatten, fc."""

    def __init__(self, channels: int, n_classes: int, norm: str, groups: int, width: int):
        super().__init__()
        bias = norm == "none"
        self.conv1 = nn.Conv2d(channels, width, 3, stride=1, padding=1, bias=bias)
        self.norm1 = _norm_layer(norm, groups, width)
        self.relu = nn.ReLU()
        stages = []
        c_in = width
        for stage, stride in enumerate((1, 2, 2, 2)):
            c_out = width * 2**stage
            stages.append(
                nn.Sequential(
                    BasicBlock(c_in, c_out, stride, norm, groups),
                    BasicBlock(c_out, c_out, 1, norm, groups),
                )
            )
            c_in = c_out
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(c_in, n_classes)

    def forward(self, x):
        x = self.relu(self.norm1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.flatten(self.pool(x)))


def char_lstm(
    input_shape: tuple[int, ...],
    n_classes: int,
    embedding_dim: int = 8,
    hidden: int = 256,
    layers: int = 2,
) -> nn.Module:
    """Next-character LSTM (the LEAF Shakespeare model: embedding 8, two LSTM layers of 256):
    (B, T) int64 character ids -> (B, T, n_classes) logits, each position predicting the
    character that follows it. The vocabulary is the classes: n_classes characters."""
    if len(input_shape) != 1:
        raise FedjouleError(
            f"model 'char-lstm' needs sequence input (length,) of character ids, got shape "
            f"{input_shape}"
        )
    return CharLSTM(n_classes, embedding_dim, hidden, layers)


class CharLSTM(nn.Module):
    """See `char_lstm`: embedding, LSTM (batch first), linear head at every position."""

    def __init__(self, vocabulary: int, embedding_dim: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocabulary)

    def forward(self, x):
        out, _ = self.lstm(self.embedding(x))
        return self.head(out)
