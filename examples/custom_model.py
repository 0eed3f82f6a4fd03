"""A model of your own: a factory in this file, named by the scenario as
`model: {name: custom, factory: "custom_model.py:make_net", options: {hidden: 32}}`.

fedjoule calls the factory as make_net(input_shape, n_classes, **options) and trains the
nn.Module it returns on every client (cross-entropy loss; or return (module, loss_fn)).
The spec names the file by its full path, so this runs
from any folder:

    python examples/custom_model.py [OUT_FOLDER]
"""

import math
import sys
import tempfile
from pathlib import Path

from torch import nn

import fedjoule

HERE = Path(__file__).resolve().parent  # this file's folder, wherever it runs from


def make_net(input_shape: tuple[int, ...], n_classes: int, hidden: int = 32) -> nn.Module:
    """A two-layer perceptron for samples of shape `input_shape`."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(math.prod(input_shape), hidden),
        nn.ReLU(),
        nn.Linear(hidden, n_classes),
    )


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "custom-model"
    scenario = fedjoule.load_scenario(
        "default",
        {
            "name": "custom-model",
            "model.name": "custom",
            "model.factory": f"{HERE / 'custom_model.py'}:make_net",
            "model.options": {"hidden": 32},
            "training.rounds": 3,
            "training.local_steps": 5,
            "training.clients_per_round": 5,
            "population.size": 20,
            "dataset.synthetic.avg_samples": 50,
            "round.min_clients": 1,
        },
    )
    result = fedjoule.run(scenario, out)
    for row in result.rounds:
        print(
            f"round {row['round']}: accuracy {row['accuracy']:.3f}, "
            f"energy {row['cumulative_energy_j']:.4g} J"
        )
    print(f"final accuracy {result.summary['final_accuracy']:.3f}; results in {result.folder}")


if __name__ == "__main__":
    main()
