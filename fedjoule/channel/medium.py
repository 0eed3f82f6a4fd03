"""The shared uplink as a SimPy object: FDMA processor sharing (equal, or weighted by a
policy's shares), TDMA and OFDMA queues, and a client's own fixed band (a policy's OFDMA
blocks, a TDMA turn).

Every medium has the same interface. Inside a client process::

    try:
        airtime_s = yield from medium.transmit(bits, link)
    except TransmissionAborted as aborted:   # a simpy.Interrupt hit the client
        airtime_s = aborted.airtime_s        # time actually spent sending

`transmit` returns the time the client spent sending (queueing time excluded), so
the transmit energy is `link.tx_energy_j(airtime_s)` in both cases.
"""

from collections.abc import Callable, Generator
from typing import Any

import simpy

from fedjoule.channel.link import Link
from fedjoule.errors import FedjouleError

ACCESS_KINDS = ("fdma", "tdma", "ofdma")

# Transfers whose remaining time is below this are done together (float round-off).
_FINISH_TOLERANCE_S = 1e-9


class TransmissionAborted(simpy.Interrupt):
    """A transmission cut short by a `simpy.Interrupt` of the transmitting process.

    It is itself a `simpy.Interrupt` with the same `cause`, so a client process that
    catches `simpy.Interrupt` also catches it.
    """

    def __init__(self, airtime_s: float, cause: Any, bits_sent: float) -> None:
        super().__init__(cause)
        self.airtime_s = airtime_s
        self.bits_sent = bits_sent

    def __str__(self) -> str:
        return (
            f"TransmissionAborted(cause={self.cause!r}, airtime_s={self.airtime_s}, "
            f"bits_sent={self.bits_sent})"
        )


def _check_bits(bits: float) -> float:
    bits = float(bits)
    if not bits >= 0:
        raise ValueError(f"cannot transmit {bits} bits")
    return bits


class _Transfer:
    """One transmitter's state on the FDMA medium."""

    __slots__ = ("bits", "link", "remaining_bits", "rate_bps", "done", "on_rate", "weight")

    def __init__(
        self, bits: float, link: Link, done: simpy.Event, on_rate=None, weight=None
    ) -> None:
        self.bits = bits
        self.link = link
        self.remaining_bits = bits
        self.rate_bps = 0.0
        self.done = done
        self.on_rate = on_rate  # called with the new rate whenever it changes
        self.weight = weight  # a policy's share (None: equal processor sharing)


class RateSharing:
    """Transfers that share a medium at rates that change only when one joins, finishes or
    leaves: on every change the remaining bits are brought up to date at the old rates,
    the rates recomputed (`_rates`, the medium's rule) and one wake-up timer re-armed for
    the next finish. Transfers: anything with remaining_bits, rate_bps, on_rate, done."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self._transfers: list = []
        self._last_update_s = env.now
        self._generation = 0  # bumped on every change; older wake-ups are ignored

    def _rates(self) -> list[float]:
        """Each transfer's rate now (bit/s), in the order of self._transfers."""
        raise NotImplementedError

    def _sent_for(self, elapsed_s: float) -> None:
        """Called as the transfers' bits are brought up to date over `elapsed_s` (a medium
        that integrates more than bits over time does it here)."""

    def _advance(self) -> None:
        """Subtract the bits sent since the last change at the current rates."""
        elapsed_s = self.env.now - self._last_update_s
        if elapsed_s > 0:
            for transfer in self._transfers:
                transfer.remaining_bits -= transfer.rate_bps * elapsed_s
            self._sent_for(elapsed_s)
        self._last_update_s = self.env.now

    def _rearm(self) -> None:
        """Recompute the rates and schedule a wake-up at the next finish."""
        self._generation += 1
        if not self._transfers:
            return
        next_s = float("inf")
        for transfer, rate_bps in zip(self._transfers, self._rates(), strict=True):
            if transfer.on_rate is not None and rate_bps != transfer.rate_bps:
                transfer.on_rate(rate_bps)
            transfer.rate_bps = rate_bps
            if rate_bps > 0:
                next_s = min(next_s, max(0.0, transfer.remaining_bits) / rate_bps)
        if next_s == float("inf"):
            return  # nobody can make progress; only an interrupt ends these transfers
        timer = self.env.timeout(next_s)
        generation = self._generation
        timer.callbacks.append(lambda _event: self._wake(generation))

    def _wake(self, generation: int) -> None:
        if generation != self._generation:
            return  # the medium changed after this wake-up was armed
        self._advance()
        for transfer in finished_now(self._transfers):
            self._transfers.remove(transfer)
            transfer.remaining_bits = 0.0
            transfer.done.succeed()
        self._rearm()

    def _join(self, transfer) -> None:
        self._advance()
        self._transfers.append(transfer)
        self._rearm()

    def _leave(self, transfer) -> None:
        """Take an aborted transfer off the medium (nothing if it had finished)."""
        if transfer in self._transfers:
            self._advance()
            self._transfers.remove(transfer)
            self._rearm()


class FdmaMedium(RateSharing):
    """Band `bandwidth_hz` split among the transmitters active at each moment.

    Exact processor sharing: with n active transmitters each sends at
    `link.rate_bps(bandwidth_hz / n)`; with a policy's weights w_k (transmit's `weight`),
    generalised processor sharing (Parekh & Gallager, IEEE/ACM ToN 1993): each sends at
    `link.rate_bps(bandwidth_hz * w_k / sum of the active w_j)`, so the band a finished
    client frees goes to the others. On every join, finish or abort the remaining bits are
    brought up to date, the rates recomputed and one wake-up timer re-armed for the next
    finish.
    """

    def __init__(self, env: simpy.Environment, bandwidth_hz: float) -> None:
        if not bandwidth_hz > 0:
            raise FedjouleError(f"the uplink bandwidth must be > 0 Hz, got {bandwidth_hz}")
        super().__init__(env)
        self.bandwidth_hz = float(bandwidth_hz)

    @property
    def active_count(self) -> int:
        """Number of transmitters currently on the medium."""
        return len(self._transfers)

    @property
    def share_hz(self) -> float:
        """Bandwidth each active transmitter has now (the whole band when idle)."""
        return self.bandwidth_hz / max(1, len(self._transfers))

    def transmit(
        self,
        bits: float,
        link: Link,
        on_start: Callable[[], None] | None = None,
        on_rate: Callable[[float], None] | None = None,
        weight: float | None = None,
    ) -> Generator[simpy.Event, Any, float]:
        """Send `bits` over `link`; returns the airtime, raises TransmissionAborted.

        `on_start` is called when sending begins (at once: FDMA has no queue), `on_rate`
        with the transfer's rate at its start and at every change (a measured radio's power
        depends on it); `weight`: the transfer's weight in the sharing (None: equal; a cell
        mixes no None with weights)."""
        bits = _check_bits(bits)
        start_s = self.env.now
        if bits == 0:
            return 0.0
        if on_start is not None:
            on_start()
        transfer = _Transfer(bits, link, self.env.event(), on_rate, weight)
        self._join(transfer)
        try:
            yield transfer.done
        except simpy.Interrupt as interrupt:
            self._leave(transfer)
            raise TransmissionAborted(
                self.env.now - start_s, interrupt.cause, bits - transfer.remaining_bits
            ) from interrupt
        return self.env.now - start_s

    def _rates(self) -> list[float]:
        if self._transfers[0].weight is not None:  # weighted: B w_k / sum_j w_j
            total = sum(transfer.weight for transfer in self._transfers)
            return [t.link.rate_bps(self.bandwidth_hz * t.weight / total) for t in self._transfers]
        share_hz = self.bandwidth_hz / len(self._transfers)
        return [transfer.link.rate_bps(share_hz) for transfer in self._transfers]


class Weighted:
    """One client's access to its cell's FdmaMedium with a policy's weight (its share s_k
    of the band, or s_k B): the medium's transmit with that weight."""

    def __init__(self, medium: FdmaMedium, weight: float) -> None:
        self.medium, self.weight = medium, float(weight)

    def transmit(self, bits, link: Link, on_start=None, on_rate=None):
        """FdmaMedium.transmit with this client's weight."""
        return self.medium.transmit(bits, link, on_start, on_rate, weight=self.weight)


def finished_now(transfers: list) -> list:
    """The transfers (anything with rate_bps and remaining_bits) whose last bits are due
    within _FINISH_TOLERANCE_S, or, when round-off left none, the earliest finisher (a few
    bits short). Shared by the cell media here and the co-channel network."""
    finished = [
        t
        for t in transfers
        if t.rate_bps > 0 and t.remaining_bits <= t.rate_bps * _FINISH_TOLERANCE_S
    ]
    return finished or [min(transfers, key=_time_left_s)]


def _time_left_s(transfer: _Transfer) -> float:
    if transfer.rate_bps <= 0:
        return float("inf")
    return transfer.remaining_bits / transfer.rate_bps


class _QueuedMedium:
    """`channels` parallel sub-bands of bandwidth_hz / channels, FIFO queue (SimPy Resource)."""

    def __init__(self, env: simpy.Environment, bandwidth_hz: float, channels: int) -> None:
        if not bandwidth_hz > 0:
            raise FedjouleError(f"the uplink bandwidth must be > 0 Hz, got {bandwidth_hz}")
        self.env = env
        self.bandwidth_hz = float(bandwidth_hz)
        self.share_hz = self.bandwidth_hz / channels
        self._resource = simpy.Resource(env, capacity=channels)

    @property
    def active_count(self) -> int:
        """Number of transmitters currently sending."""
        return self._resource.count

    @property
    def queued_count(self) -> int:
        """Number of transmitters waiting for the medium."""
        return len(self._resource.queue)

    def transmit(
        self,
        bits: float,
        link: Link,
        on_start: Callable[[], None] | None = None,
        on_rate: Callable[[float], None] | None = None,
    ) -> Generator[simpy.Event, Any, float]:
        """Queue, then send `bits` over `link`; returns the airtime (sending time only).

        `on_start` is called when the client gets its sub-band and starts sending, then
        `on_rate` with its (constant) rate."""
        bits = _check_bits(bits)
        if bits == 0:
            return 0.0
        sending_since_s: float | None = None
        rate_bps = 0.0
        with self._resource.request() as request:
            try:
                yield request
                sending_since_s = self.env.now
                if on_start is not None:
                    on_start()
                rate_bps = link.rate_bps(self.share_hz)
                if on_rate is not None:
                    on_rate(rate_bps)
                # A zero-rate link holds its sub-band until an interrupt ends it.
                yield self.env.timeout(bits / rate_bps) if rate_bps > 0 else self.env.event()
            except simpy.Interrupt as interrupt:
                airtime_s = 0.0 if sending_since_s is None else self.env.now - sending_since_s
                bits_sent = min(bits, rate_bps * airtime_s)
                raise TransmissionAborted(airtime_s, interrupt.cause, bits_sent) from interrupt
        assert sending_since_s is not None
        return self.env.now - sending_since_s


class TdmaMedium(_QueuedMedium):
    """One transmitter at a time with the whole band; the others queue in FIFO order."""

    def __init__(self, env: simpy.Environment, bandwidth_hz: float) -> None:
        super().__init__(env, bandwidth_hz, 1)


class OfdmaMedium(_QueuedMedium):
    """`resource_blocks` blocks of bandwidth_hz / resource_blocks; one block per transmitter."""

    def __init__(self, env: simpy.Environment, bandwidth_hz: float, resource_blocks: int) -> None:
        if int(resource_blocks) != resource_blocks or resource_blocks < 1:
            raise FedjouleError(
                f"OFDMA needs a whole number of resource blocks >= 1, got {resource_blocks}"
            )
        super().__init__(env, bandwidth_hz, int(resource_blocks))
        self.resource_blocks = int(resource_blocks)


class OwnBand(_QueuedMedium):
    """One client's own fixed band `bandwidth_hz`, a policy's allocation (OFDMA: its
    resource blocks; TDMA: the whole band in its turn, InTurn): it sends at
    link.rate_bps(bandwidth_hz) for its whole upload, whoever else joins or finishes."""

    def __init__(self, env: simpy.Environment, bandwidth_hz: float) -> None:
        super().__init__(env, bandwidth_hz, 1)


class SlotOrder:
    """A cell's TDMA turns in a policy's order (rank 0 first): a client sends once every
    client ranked before it has passed its turn (its last attempt ended, or it was stopped),
    even when the band is idle before that."""

    def __init__(self, env: simpy.Environment, n_clients: int) -> None:
        self.env = env
        self.passed = [False] * n_clients
        self.current = 0  # the rank whose turn it is
        self.waiting: dict[int, simpy.Event] = {}

    def turn(self, rank: int) -> simpy.Event | None:
        """None when it is `rank`'s turn, else the event of its turn coming."""
        if rank <= self.current:
            return None
        return self.waiting.setdefault(rank, self.env.event())

    def pass_turn(self, rank: int) -> None:
        """`rank` is done: the turn goes to the next rank not yet done (repeats: nothing)."""
        self.passed[rank] = True
        while self.current < len(self.passed) and self.passed[self.current]:
            self.current += 1
        coming = self.waiting.pop(self.current, None)
        if coming is not None:
            coming.succeed()


class InTurn:
    """One client's access to its cell's TDMA band in a policy's slot order (SlotOrder): it
    waits for its turn, then sends its `attempts` back to back on the whole band
    `bandwidth_hz`; its turn passes after the last of them, or when it is stopped."""

    def __init__(self, env, bandwidth_hz: float, order: SlotOrder, rank: int, attempts: int):
        self.env, self.order, self.rank, self.attempts = env, order, rank, attempts
        self.band = OwnBand(env, bandwidth_hz)
        self.sent = 0

    def transmit(self, bits, link: Link, on_start=None, on_rate=None):
        """Wait for the turn, then send `bits` (OwnBand.transmit); the same airtime and
        TransmissionAborted."""
        turn = self.order.turn(self.rank)
        try:
            if turn is not None:
                try:
                    yield turn
                except simpy.Interrupt as interrupt:  # stopped while waiting: nothing sent
                    raise TransmissionAborted(0.0, interrupt.cause, 0.0) from interrupt
            airtime_s = yield from self.band.transmit(bits, link, on_start, on_rate)
        except TransmissionAborted:
            self.give_up()
            raise
        self.sent += 1
        if self.sent >= self.attempts:
            self.give_up()
        return airtime_s

    def give_up(self, _event=None) -> None:
        """The client is done with the band (also as a callback at its process's end)."""
        self.order.pass_turn(self.rank)


Medium = FdmaMedium | TdmaMedium | OfdmaMedium | OwnBand | InTurn | Weighted


def make_medium(
    env: simpy.Environment, access: str, bandwidth_hz: float, resource_blocks: int = 10
) -> Medium:
    """The medium for `access` in {"fdma", "tdma", "ofdma"}."""
    if access == "fdma":
        return FdmaMedium(env, bandwidth_hz)
    if access == "tdma":
        return TdmaMedium(env, bandwidth_hz)
    if access == "ofdma":
        return OfdmaMedium(env, bandwidth_hz, resource_blocks)
    raise FedjouleError(f"unknown uplink access {access!r}; valid: {', '.join(ACCESS_KINDS)}")
