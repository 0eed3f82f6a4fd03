"""A 2 x 2 sweep from Python: local steps K x learning rate, one run per point, and the
table of their results (sweep.csv) printed.

    python sweep.py [OUT_FOLDER]
"""

import sys
import tempfile
from pathlib import Path

import fedjoule


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "sweep"
    result = fedjoule.sweep(
        "default",
        {"training.local_steps": [1, 10], "training.lr": [0.02, 0.1]},
        out,
        overrides={
            "training.rounds": 3,
            "training.clients_per_round": 5,
            "population.size": 20,
            "dataset.synthetic.avg_samples": 50,
            "round.min_clients": 1,
        },
        workers=1,  # the runs one after the other, in this process
    )
    columns = ["run", "final_accuracy", "energy_total_j", "sim_time_s"]
    print("  ".join(f"{c:>24}" for c in columns))
    for row in result.table:
        cells = [f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in columns]
        print("  ".join(f"{c:>24}" for c in cells))
    print(f"results in {result.folder}")


if __name__ == "__main__":
    main()
