"""Where benchmark scripts keep their raw figures: benchmarks/results/<name>.json."""

import json
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def save_results(name: str, data, folder: Path = RESULTS) -> Path:
    """Write `data` as indented JSON to folder/<name>.json; returns the path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data, indent=1))
    return path
