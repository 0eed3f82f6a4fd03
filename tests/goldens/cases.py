"""The golden runs: a fixed list of small command lines, one per path through the
simulator (tests/goldens/record.py records them, tests/test_goldens.py replays them)."""

from dataclasses import dataclass

# default-theory cut down: 20 clients, 5 a round, 5 local steps, events.jsonl written
TINY = (
    "population.size=20",
    "training.clients_per_round=5",
    "training.local_steps=5",
    "output.events=true",
)
# the synthetic MLP scenarios (urban-macro, dense-small-cells, ...) with a small model
SMALL_MLP = (
    "dataset.synthetic.dim=20",
    "dataset.synthetic.avg_samples=60",
    "model.hidden=[16]",
    "training.local_steps=3",
    "output.events=true",
    "output.timeline_rounds=[]",
    "round.min_clients=2",
)


@dataclass(frozen=True)
class Case:
    """One golden: `args` of `fedjoule` before `--out`, `sets` given as `--set`. `system`:
    no training, so every number is compared whatever the torch and numpy versions.
    `learnt`: who takes part (and so time and energy) depends on what is learnt, so on
    other versions nothing of it is compared."""

    name: str
    args: tuple[str, ...]
    sets: tuple[str, ...] = ()
    system: bool = False
    learnt: bool = False

    def argv(self, out) -> list[str]:
        sets = [f"--set={s}" for s in self.sets]
        return [*self.args, *sets, "--out", str(out), "-q"]


RUN = ("run", "--threads", "1", "--device", "cpu")
CASES = (
    Case("sync", (*RUN, "default-theory"), (*TINY, "training.rounds=4")),
    Case(
        "async",
        (*RUN, "default-theory"),
        (*TINY, "training.rounds=6", "protocol.kind=async", "protocol.concurrency=5"),
    ),
    Case(
        "buffered",
        (*RUN, "default-theory"),
        (
            *TINY,
            "training.rounds=4",
            *"protocol.kind=buffered protocol.concurrency=6 protocol.buffer_size=3".split(),
        ),
    ),
    Case(
        "hierarchical",
        (*RUN, "default-theory"),
        (*TINY, "training.rounds=2", "protocol.kind=hierarchical", "protocol.edge_rounds=2"),
    ),
    Case(
        "hierarchical-multicell",  # 7 cells, backhaul capacity and latency
        (*RUN, "dense-small-cells"),
        (
            *SMALL_MLP,
            *"population.size=28 training.clients_per_round=7 training.rounds=1 "
            "protocol.kind=hierarchical".split(),
        ),
    ),
    Case(
        "no-train-numpy",  # OFDMA, outage, over-commit, Markov availability
        (*RUN, "urban-macro", "--no-train", "--engine", "numpy"),
        tuple(
            "population.size=100 training.rounds=4 output.events=false "
            "output.timeline_rounds=[]".split()
        ),
        system=True,
    ),
    Case(
        "no-train-simpy",
        (*RUN, "urban-macro", "--no-train", "--engine", "simpy"),
        tuple(
            "population.size=100 training.rounds=4 output.events=true "
            "output.timeline_rounds=[]".split()
        ),
        system=True,
    ),
    Case("radio-states", (*RUN, "default"), (*TINY, "training.rounds=3")),
    Case(
        "compression",
        (*RUN, "default-theory"),
        (
            *TINY,
            "training.rounds=3",
            "model.name=mlp",
            "model.hidden=[8]",
            "compression.uplink={kind: topk, fraction: 0.3, error_feedback: true}",
            "compression.downlink={kind: qsgd, levels: 16}",
        ),
    ),
    Case(
        "interference",  # co-channel, 7 cells
        (*RUN, "dense-small-cells-interference"),
        (*SMALL_MLP, "population.size=28", "training.clients_per_round=7", "training.rounds=2"),
    ),
    Case(
        "link-traces",
        (*RUN, "walking-trace-links"),
        (*SMALL_MLP, "population.size=10", "training.clients_per_round=4", "training.rounds=3"),
    ),
    Case("fedscale-traces", (*RUN, "fedscale-format-small"), (*SMALL_MLP, "training.rounds=3")),
    Case("seeds", (*RUN, "--seeds", "2", "default-theory"), (*TINY, "training.rounds=2")),
    Case(
        "taco-freeloaders",
        (*RUN, "default-theory"),
        tuple(
            "population.size=20 training.clients_per_round=10 training.local_steps=5 "
            "training.rounds=3 algorithm.name=taco population.freeloaders.fraction=0.4 "
            "population.freeloaders.behaviour=replay availability.kind=always "
            "output.events=true".split()
        ),
        learnt=True,
    ),
    Case(
        "plan-replay",
        tuple(
            "plan default-theory --k 2,5 --snr-db 10,20 --bandwidth-hz 1e6 --max-rounds 4 "
            "--workers 1 --threads-per-run 1 --device cpu".split()
        ),
        tuple(
            "population.size=20 training.clients_per_round=5 output.events=true "
            "round.deadline_s=null training.target_value=0.4".split()
        ),
        learnt=True,  # the rounds to the target
    ),
    Case(
        "capacity",
        tuple(
            "capacity default-theory --search uplink_bandwidth_hz --deadline-s 0.1 "
            "--rounds 3".split()
        ),
        ("population.size=60",),
        system=True,
    ),
)

# the resume golden: `RESUMED`'s run stopped after `STOP_AFTER` of its rounds, as today's
# code wrote it (checkpoint.pt and the files it names), in tests/goldens/<RESUME_DIR>
RESUMED = "sync"
STOP_AFTER = 2
RESUME_DIR = "sync-stopped"
