"""torchvision, imported on first use: importing it costs about 1.5 s, which only the
image datasets (MNIST and its kin, CIFAR, any torchvision class, a folder of images)
need, so every other dataset and command goes without."""

from types import ModuleType


def torchvision() -> ModuleType:
    """The torchvision package, with its datasets and transforms loaded."""
    # deferred: torchvision (1.5 s; image datasets only)
    import torchvision

    return torchvision
