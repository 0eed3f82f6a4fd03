"""Constants, bounds and the Section base every scenario section builds on."""

from collections.abc import Callable, Iterator
from typing import Annotated, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    model_validator,
)
from pydantic_core import PydanticCustomError

# Upper bounds (see each field's description for why).
MAX_CLIENTS = 10_000_000  # the system engine ran 1,000,000 devices in 1 GB; 10x that fits
MAX_ROUNDS = 1_000_000  # papers run <= 10,000 rounds; rounds.csv stays < 1 GB
MAX_TIME_S = 1.0e9  # about 32 years of simulated time: no round, period or wait is longer
MAX_CELLS = 1_000  # a large city's sites; client-to-cell association is N x cells
MAX_DB = 300.0  # any dB/dBm value: keeps 10^(x/10) and its square finite
MAX_SEED = 2**63 - 1  # fits a signed 64-bit integer in every output and tool


def _whole_number(value):
    """Integer fields take whole-number floats (YAML reads 1.0e6 as a float); a fractional,
    non-finite or boolean value is left for strict validation to reject."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


Int = Annotated[int, BeforeValidator(_whole_number)]
"""An integer field: whole numbers (also written as 1.0e6), never true/false."""


class Section(BaseModel):
    """A scenario section: unknown fields are errors, numbers are finite, types strict."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    # Checks over several fields of the section: each takes the section (or a view of its
    # raw values that raises fedjoule.scenarios.schema.Invalid for a value that did not
    # validate) and yields (field name, message) for each problem.
    cross_checks: ClassVar[tuple[Callable[..., Iterator[tuple[str, str]]], ...]] = ()

    @model_validator(mode="after")
    def _cross_field(self):
        problems = [
            f"{field}: {message}"
            for check in type(self).cross_checks
            for field, message in check(self)
        ]
        if problems:
            raise PydanticCustomError("cross_field", "{message}", {"message": "; ".join(problems)})
        return self


class Invalid(Exception):  # noqa: N818 - a signal, not an error
    """A cross-field check needs a value that did not validate: the check is skipped."""
