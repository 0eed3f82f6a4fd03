"""What each built-in algorithm declares as plain data (no torch): the facts the engines
without training read (its vectors each way, its computation, whether its selection is
learnt or it needs a loss-probe set). Each algorithm's class takes these as its class
attributes (base.Algorithm), so a fact is stated once; `tests/algorithms/
test_declarations.py` holds them equal to the classes and to the dry count
(docs/algorithms.md#computation).
"""

from dataclasses import dataclass

DOWNLINK_REFUSAL = (
    "it does not declare downlink_compressible = True (its clients must read start and "
    "anchor through ctx.vector and need no other broadcast vector)"
)


@dataclass(frozen=True)
class AlgorithmDeclaration:
    """One algorithm's facts. `aggregation_flops_per_param`: the server's aggregation
    FLOPs per parameter as (c0, c1, c2) in c0 + c1 m + c2 m^2 over m arrived uploads.
    Gradient evaluations per local step: `first_step_gradients` at step 0 (in the first
    round, in later rounds) and `step_gradients` at every later step."""

    name: str
    uplink_vectors: int = 1  # model-sized vectors each client uploads
    downlink_vectors: int = 1  # model-sized vectors the server broadcasts
    needs_probe: bool = False  # a second, uniform set returns losses (DRFA, DRDM)
    learnt_selection: bool = False  # its selection_weights come from its state
    # FLOPs per parameter of its own vector operations in one local step, beyond plain
    # SGD's (a correction term and its addition to the gradient)
    step_vector_flops: float = 0.0
    # FedAvg's weighted mean: a multiply and an add per parameter and upload
    aggregation_flops_per_param: tuple[float, float, float] = (0.0, 2.0, 0.0)
    first_step_gradients: tuple[int, int] = (1, 1)
    step_gradients: int = 1
    # downlink compression gives each client its own start (and anchor): an algorithm
    # allows it only when its clients read those through ctx.vector and need no other
    # broadcast vector (docs/compression.md)
    downlink_compressible: bool = False
    downlink_refusal: str = DOWNLINK_REFUSAL
    # an option value under which the uplink cannot be compressed: (option, value, why)
    uplink_refusal: tuple[str, object, str] | None = None

    def aggregation_flops(self, n_params: int, arrived: int) -> float:
        """FLOPs of the server's aggregation of `arrived` uploads."""
        c0, c1, c2 = self.aggregation_flops_per_param
        return (c2 * arrived**2 + c1 * arrived + c0) * n_params

    def gradient_counts(self, steps: int, rounds: int = 2) -> list[list[int]]:
        """Gradient evaluations per local step in each of the first `rounds` rounds of a
        client with `steps` steps (learning.dry_count's answer; later rounds repeat the last)."""
        return [
            [self.first_step_gradients[min(r, 1)]] + [self.step_gradients] * (steps - 1)
            if steps
            else []
            for r in range(rounds)
        ]


def compression_refusal(algorithm, config, direction: str) -> str | None:
    """Why `algorithm` (a declaration, or a class with the same attributes) with options
    `config` cannot compress `direction` ('uplink', 'downlink'); None: it can."""
    if direction == "downlink":
        return None if algorithm.downlink_compressible else algorithm.downlink_refusal
    rule = algorithm.uplink_refusal
    if rule is not None and getattr(config, rule[0], None) == rule[1]:
        return rule[2]
    return None


# the base class's facts: FedAvg's, under the name "base"
BASE = AlgorithmDeclaration("base")
# FedDyn's local objective: alpha_i (theta - w) - g_i, added to the gradient
FEDDYN_STEP_FLOPS = 4

DECLARATIONS = {
    d.name: d
    for d in (
        AlgorithmDeclaration("fedavg", downlink_compressible=True),
        # mu (theta - w): subtract, multiply; added to the gradient
        AlgorithmDeclaration("fedprox", step_vector_flops=3, downlink_compressible=True),
        AlgorithmDeclaration(
            "scaffold",
            downlink_refusal="its broadcast carries the control variate c beside the model",
            uplink_vectors=2,  # delta y, delta c
            downlink_vectors=2,  # x, c
            step_vector_flops=2,  # c - c_i; added to the gradient
            # mean(delta y), x + eta_g (.); sum(delta c), c + (.) / N
            aggregation_flops_per_param=(4.0, 2.0, 0.0),
        ),
        AlgorithmDeclaration(
            "feddyn",
            downlink_compressible=True,
            step_vector_flops=FEDDYN_STEP_FLOPS,
            # h - (alpha/N) sum(theta_i - w); mean theta_i - h / alpha
            aggregation_flops_per_param=(4.0, 3.0, 0.0),
        ),
        AlgorithmDeclaration(
            "feddc",
            downlink_refusal="its broadcast carries the control variate c beside the model",
            uplink_refusal=(
                "aggregation",
                "paper",
                "aggregation: paper averages theta_i + h_i, which the server cannot rebuild "
                "from the compressed delta_i (it does not know h_i); use aggregation: code",
            ),
            uplink_vectors=2,
            downlink_vectors=2,
            # alpha_i (theta + h_i - w) + c / w_i - c_i: six operations; added to the gradient
            step_vector_flops=7,
            # c + sum(delta c) / N; h_sum + sum(delta); mean theta_i + h_sum / N
            aggregation_flops_per_param=(5.0, 3.0, 0.0),
        ),
        AlgorithmDeclaration(
            "taco",
            downlink_refusal="its clients use the last aggregated update Delta beside the model",
            learnt_selection=True,  # expelled clients are not selected
            step_vector_flops=2,  # gamma (1 - alpha_i) Delta: a multiply; added to the gradient
            # mean; <Delta_i, mean> and |Delta_i|^2 (a multiply and an add each); the
            # weighted sum; w - eta_g lr Delta
            aggregation_flops_per_param=(2.0, 7.0, 0.0),
        ),
        AlgorithmDeclaration(
            "drfa",
            downlink_compressible=True,  # (the probe's model goes uncompressed)
            uplink_vectors=2,  # final model and snapshot
            needs_probe=True,
            learnt_selection=True,  # sampled by lambda
            # weighted means of the models and of the snapshots
            aggregation_flops_per_param=(0.0, 4.0, 0.0),
        ),
        AlgorithmDeclaration(
            "drdm",
            downlink_compressible=True,
            uplink_vectors=2,
            needs_probe=True,
            learnt_selection=True,
            step_vector_flops=FEDDYN_STEP_FLOPS,  # FedDyn's local objective
            # omega-weighted drift (subtract, multiply, add), h update, weighted mean of
            # the models, w = (.) - h / alpha, weighted mean of the snapshots
            aggregation_flops_per_param=(4.0, 7.0, 0.0),
        ),
        AlgorithmDeclaration(
            "foolsgold",
            downlink_compressible=True,
            # deltas, histories += deltas, unit rows (norm: 2, divide: 1), the m x m cosine
            # similarities (2 m^2 P), the weighted sum (2), its mean and w + total
            aggregation_flops_per_param=(2.0, 7.0, 2.0),
        ),
        AlgorithmDeclaration(
            "stem",
            downlink_refusal="its broadcast carries the momentum d beside the model",
            uplink_vectors=2,
            downlink_vectors=2,
            # d - g(x_{k-1}), x (1 - a), g(x_k) + (.): the STORM update
            step_vector_flops=3,
            aggregation_flops_per_param=(0.0, 2.0, 0.0),  # the means of x and d
            # step 0: d starts as a gradient in the first round, is the broadcast momentum
            # later; every other step evaluates g(x_k) and g(x_{k-1})
            first_step_gradients=(1, 0),
            step_gradients=2,
        ),
        AlgorithmDeclaration(
            "fedacg",
            downlink_compressible=True,  # the look-ahead is the one broadcast vector
            step_vector_flops=3,  # 2 beta (theta - look-ahead): subtract, multiply; added
            # look-ahead w + lambda m; mean(theta_i - look-ahead); m <- lambda m + (.); w + m
            aggregation_flops_per_param=(5.0, 2.0, 0.0),
        ),
    )
}
