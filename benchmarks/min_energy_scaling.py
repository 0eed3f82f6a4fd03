"""min-energy's cost by the number of clients sending in a cell (docs/policies.md): a
`min_energy_weights` call, one evaluation of the weighted sharing (`shared_upload`) on its
weights, and the phase-by-phase walk (`phase_upload_time_s`) on the same, on the tests'
clients (tests/policies/test_shared_upload.py's `uplink(m, 3)`: SNR -15 to 65 dB, 6 kbit,
0.2 or 0.01 W) with a common deadline 1.5 times equal sharing's longest upload. Medians of
a few repeats; the walk's times against the evaluation's (their largest relative gap).

Run: PYTHONPATH=.:tests/policies python benchmarks/min_energy_scaling.py
[--sizes 100,300,1000,3000]"""

import argparse
import os
import time

import numpy as np
from record import save_results  # benchmarks/record.py


def timed_ms(call, args: tuple, repeats: int) -> tuple[float, object]:
    """The median ms of call(*args) over `repeats`, and its result."""
    times, out = [], None
    for _ in range(repeats):
        tic = time.perf_counter()
        out = call(*args)
        times.append(time.perf_counter() - tic)
    return 1e3 * float(np.median(times)), out


def main() -> None:
    from test_shared_upload import uplink  # tests/policies on the path

    from fedjoule.policies.bandwidth import equal_shares
    from fedjoule.policies.min_energy import min_energy_weights
    from fedjoule.policies.shared_upload import phase_upload_time_s, shared_upload_time_s

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,300,1000,3000")
    args = parser.parse_args()
    rows = []
    for m in map(int, args.sizes.split(",")):
        up = uplink(m, 3)
        deadline_s = 1.5 * shared_upload_time_s(up, equal_shares(up)).max()
        repeats = 5 if m <= 1000 else 2
        call_ms, weights = timed_ms(min_energy_weights, (up, deadline_s), repeats)
        solve_ms, solved_s = timed_ms(shared_upload_time_s, (up, weights), repeats)
        walk_ms, walked_s = timed_ms(phase_upload_time_s, (up, weights), repeats)
        rows.append({
            "clients": m, "min_energy_call_ms": call_ms, "evaluation_ms": solve_ms,
            "walk_ms": walk_ms, "walk_gap": float(np.max(np.abs(solved_s / walked_s - 1))),
        })  # fmt: skip
        print(f"{m:>5} clients: min-energy call {call_ms:8.2f} ms, one evaluation "
              f"{solve_ms:7.3f} ms, the walk {walk_ms:8.2f} ms "
              f"(gap {rows[-1]['walk_gap']:.1e})")  # fmt: skip
    save_results("min_energy_scaling", {"rows": rows, "load_average": os.getloadavg()})


if __name__ == "__main__":
    main()
