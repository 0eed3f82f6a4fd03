"""The built-in algorithms' declared facts (algorithms/declarations.py), which the engines
without training and the scenario checks read instead of loading the classes (and torch),
equal what the classes do: their attributes, their learnt selection, their aggregation
FLOPs, their compression refusals, and the gradient evaluations the dry count counts by
training."""

import pytest

from fedjoule.algorithms.base import Algorithm
from fedjoule.algorithms.declarations import DECLARATIONS
from fedjoule.algorithms.learning import CountedDeclaration, dry_count
from fedjoule.algorithms.options import BUILT_IN
from fedjoule.algorithms.registry import ALGORITHMS, algorithm_class, compression_refusal_of
from fedjoule.scenarios.loading import load_scenario
from fedjoule.simulator.system_world import algorithm_declaration

# the server's aggregation FLOPs per parameter over m arrivals, as each class stated them
AGGREGATION = {
    "fedavg": lambda m: 2.0 * m,
    "fedprox": lambda m: 2.0 * m,
    "scaffold": lambda m: 2.0 * m + 4,
    "feddyn": lambda m: 3.0 * m + 4,
    "feddc": lambda m: 3.0 * m + 5,
    "taco": lambda m: 7.0 * m + 2,
    "drfa": lambda m: 4.0 * m,
    "drdm": lambda m: 7.0 * m + 4,
    "foolsgold": lambda m: 2.0 * m**2 + 7.0 * m + 2,
    "stem": lambda m: 2.0 * m,
    "fedacg": lambda m: 2.0 * m + 5,
}
TWO_GRADIENTS = """
from fedjoule.algorithms.fedavg import FedAvg


class ExtraGradient(FedAvg):
    uplink_vectors = 2
    step_vector_flops = 1.5

    @classmethod
    def aggregation_flops(cls, n_params, arrived):
        return 9.0 * arrived * n_params

    def direction(self, k, params, grad_at, ctx, setup, active):
        return grad_at(params - setup.lr * grad_at(params))
"""


def test_every_built_in_is_declared_under_its_name():
    assert list(DECLARATIONS) == list(BUILT_IN)
    assert all(d.name == name for name, d in DECLARATIONS.items())


@pytest.mark.parametrize("name", list(BUILT_IN))
def test_the_declaration_equals_the_class(name):
    cls, _ = ALGORITHMS[name]
    declared = DECLARATIONS[name]
    assert cls.declaration is declared and cls.name == name
    assert (cls.uplink_vectors, cls.downlink_vectors) == (
        declared.uplink_vectors,
        declared.downlink_vectors,
    )
    assert cls.needs_probe is declared.needs_probe
    assert cls.step_vector_flops == declared.step_vector_flops
    learnt = cls.selection_weights is not Algorithm.selection_weights
    assert learnt is declared.learnt_selection
    for n_params in (1, 54_410):
        for arrived in (0, 1, 7, 100):
            expected = AGGREGATION[name](arrived) * n_params
            assert cls.aggregation_flops(n_params, arrived) == expected, (name, arrived)
            assert declared.aggregation_flops(n_params, arrived) == expected


@pytest.mark.parametrize("name", list(BUILT_IN))
def test_the_declared_gradients_are_the_dry_counts(name):
    section = load_scenario("default", [f"algorithm.name={name}"]).algorithm
    assert algorithm_declaration(section) is DECLARATIONS[name]
    for steps in (1, 2, 5):
        for rounds in (1, 3):
            dry = dry_count(section, steps, rounds)
            assert DECLARATIONS[name].gradient_counts(steps, rounds) == dry, (steps, rounds)


def test_a_plugin_is_read_off_its_class_and_counted(tmp_path):
    (tmp_path / "extra.py").write_text(TWO_GRADIENTS)
    spec = f"algorithm={{name: custom, class: '{tmp_path / 'extra.py'}:ExtraGradient'}}"
    section = load_scenario("default", [spec]).algorithm
    declared = algorithm_declaration(section)
    assert isinstance(declared, CountedDeclaration)
    assert (declared.uplink_vectors, declared.downlink_vectors) == (2, 1)
    assert declared.step_vector_flops == 1.5 and not declared.needs_probe
    assert not declared.learnt_selection
    assert declared.aggregation_flops(10, 3) == 270.0
    assert declared.gradient_counts(3) == [[2, 2, 2], [2, 2, 2]]


@pytest.mark.parametrize("name", list(BUILT_IN))
def test_the_declared_compression_refusals_are_the_classes(name):
    options = [[]] + ([["algorithm.aggregation=paper"]] if name == "feddc" else [])
    for sets in options:
        section = load_scenario("default", [f"algorithm.name={name}", *sets]).algorithm
        cls, config = algorithm_class(section)
        for direction in ("uplink", "downlink"):
            declared = compression_refusal_of(section, direction)
            assert declared == cls.compression_refusal(config, direction), (sets, direction)
    compressible = name in ("fedavg", "fedprox", "feddyn", "drfa", "drdm", "foolsgold", "fedacg")
    assert DECLARATIONS[name].downlink_compressible is compressible
    if name == "feddc":
        assert compression_refusal_of(section, "uplink").startswith("aggregation: paper")
