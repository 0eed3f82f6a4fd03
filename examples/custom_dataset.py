"""A dataset of your own: a factory in this file, named by the scenario as
`dataset: {name: custom, factory: "custom_dataset.py:make_data", options: {...}}`.

fedjoule calls the factory as make_data(**options); it returns (x_train, y_train, x_test,
y_test): float features of shape (n, ...) and int64 class ids 0, 1, ... (numpy arrays or
torch tensors). fedjoule then splits the training set among the clients as
`dataset.partition` says. The spec names the file by its full path, so this runs from
any folder:

    python examples/custom_dataset.py [OUT_FOLDER]
"""

import sys
import tempfile
from pathlib import Path

import torch

import fedjoule

HERE = Path(__file__).resolve().parent  # this file's folder, wherever it runs from


def make_data(
    n_train: int = 2000, n_test: int = 500, dim: int = 10, classes: int = 4, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gaussian blobs: class c's samples scatter around a centre of its own, so a linear
    model can learn them (chance is 1 / classes)."""
    gen = torch.Generator().manual_seed(seed)
    centres = 0.7 * torch.randn(classes, dim, generator=gen)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(classes, (n,), generator=gen)
        return centres[y] + torch.randn(n, dim, generator=gen), y

    x_train, y_train = draw(n_train)
    x_test, y_test = draw(n_test)
    return x_train, y_train, x_test, y_test


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "custom-data"
    scenario = fedjoule.load_scenario(
        "default",
        {
            "name": "custom-dataset",
            "dataset.name": "custom",
            "dataset.factory": f"{HERE / 'custom_dataset.py'}:make_data",
            "dataset.options": {"n_train": 2000, "dim": 10, "classes": 4},
            "dataset.partition": "iid",
            "training.rounds": 5,
            "training.clients_per_round": 5,
            "population.size": 20,
            "round.min_clients": 1,
        },
    )
    result = fedjoule.run(scenario, out)
    for row in result.rounds:
        print(f"round {row['round']}: accuracy {row['accuracy']:.3f}")
    print(
        f"final accuracy {result.summary['final_accuracy']:.3f} (chance 0.25); "
        f"results in {result.folder}"
    )


if __name__ == "__main__":
    main()
