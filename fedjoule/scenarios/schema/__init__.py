"""The scenario schema: every field a scenario file may set, its unit, default and range.

Each section is a pydantic model with extra="forbid", so a misspelt field is an
error. Field descriptions are the documentation: docs/scenario-reference.md is
generated from them (`fedjoule reference`).

Values are checked strictly: numbers must be finite (no NaN or inf), true/false is not
a number, text is not a number, and integer fields take whole numbers only (1.0e6 is
read as 1000000, 2.5 is an error). Every count, size and time has an upper bound far
above any real deployment, so that no legal scenario exhausts memory or runs forever.

Checks that relate several fields (cross-field checks) are small functions listed in
each section's `cross_checks`; they run as a model validator, and
`fedjoule.scenarios.loading.validate` also runs them on a partly invalid file so that
one pass reports every problem.

The sections live in base, learning, devices, network, policy and run; every name is here.
"""

from fedjoule.scenarios.schema.base import (  # noqa: F401
    MAX_CELLS,
    MAX_CLIENTS,
    MAX_DB,
    MAX_ROUNDS,
    MAX_SEED,
    MAX_TIME_S,
    Int,
    Invalid,
    Section,
    _whole_number,
)
from fedjoule.scenarios.schema.devices import (  # noqa: F401
    COMPUTE_FIGURES,
    DB,
    Bandwidth,
    CapacityTraceSection,
    DeviceClass,
    DvfsCluster,
    DvfsTable,
    FreeloaderSection,
    KiloHertz,
    MilliAmps,
    OptionalPower,
    OptionalTime,
    PopulationSection,
    RadioSection,
    _at_least_1_hz,
    _charge_range,
    _compute_figures,
    _cpu_range,
    _dvfs_choice,
    _dvfs_frequency,
    _dvfs_lists,
    _power_control_fields,
    _shares,
    _unique_names,
    raw_with_profile,
)
from fedjoule.scenarios.schema.learning import (  # noqa: F401
    DATASET_NAMES,
    DatasetSection,
    ModelSection,
    Options,
    PluginSpec,
    SyntheticData,
    TrainingSection,
    _data_file,
    _dataset_plugin_fields,
    _exists,
    _factory_field,
    _found,
    _model_plugin_fields,
    _zero_init,
    resolve_plugin,
)
from fedjoule.scenarios.schema.network import (  # noqa: F401
    CELL_BOUND,
    TIME_BOUND,
    AvailabilitySection,
    Capacity,
    ChannelSection,
    Coordinate,
    EnergySection,
    Latency,
    LinkTrace,
    LinkTraces,
    Position,
    RoundSection,
    TopologySection,
    _float_width,
    _n_cells,
    _per_cell_lengths,
    _positions,
    _radius,
    _rate,
    _share_sum,
    _trace,
)
from fedjoule.scenarios.schema.policy import PolicySection  # noqa: F401
from fedjoule.scenarios.schema.run import (  # noqa: F401
    TRACKER_NAME,
    CompressionSection,
    LinkCompression,
    OutputSection,
    ProtocolSection,
    Scenario,
    TrackingSection,
    _clients_per_round,
    _compression_algorithm,
    _compression_options,
    _downlink_feedback,
    _interference,
    _min_clients,
    _plugin_reason,
    _power_control_channel,
    _protocol_algorithm,
    _protocol_fields,
    _protocol_round,
)
