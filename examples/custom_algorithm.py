"""An algorithm of your own: FedAdam from fedadam.py (in this folder), named by the
scenario as `algorithm: {name: custom, class: "fedadam.py:FedAdam", options: {...}}`.

The class subclasses fedjoule.algorithms.base.Algorithm; its config_class (a pydantic
AlgorithmConfig) checks `options`. The spec names the file by its full path, so this runs
from any folder:

    python examples/custom_algorithm.py [OUT_FOLDER]
"""

import sys
import tempfile
from pathlib import Path

import fedjoule

HERE = Path(__file__).resolve().parent  # this file's folder, wherever it runs from


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "fedadam"
    scenario = fedjoule.load_scenario(
        "default",
        {
            "name": "fedadam",
            "algorithm": {
                "name": "custom",
                "class": f"{HERE / 'fedadam.py'}:FedAdam",
                "options": {"server_lr": 0.03, "beta1": 0.9, "beta2": 0.99, "tau": 1e-3},
            },
            "training.rounds": 5,
            "training.clients_per_round": 5,
            "population.size": 20,
            "dataset.synthetic.avg_samples": 50,
            "round.min_clients": 1,
        },
    )
    result = fedjoule.run(scenario, out)
    for row in result.rounds:
        print(f"round {row['round']}: accuracy {row['accuracy']:.3f}")
    print(f"final accuracy {result.summary['final_accuracy']:.3f}; results in {result.folder}")


if __name__ == "__main__":
    main()
