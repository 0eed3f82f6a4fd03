"""Co-channel interference between cells: closed forms of the SINR-driven SimPy medium."""

import math

import numpy as np
import pytest
import simpy

from fedjoule.channel.interference import (
    CochannelNetwork,
    cochannel_matrix,
    reuse_groups,
)
from fedjoule.channel.link import Link
from fedjoule.channel.medium import TransmissionAborted
from fedjoule.channel.topology import hexagonal_sites
from fedjoule.errors import FedjouleError

B_HZ = 1e6
N0 = 4e-21  # W/Hz
P_W = 0.2
# own gains and cross gains (client k to the other cell's base station)
G_OWN = [2e-12, 1e-12]
G_CROSS = [3e-13, 5e-13]


def two_cells(access="fdma"):
    env = simpy.Environment()
    same = cochannel_matrix(reuse_groups(2, 1))
    net = CochannelNetwork(env, B_HZ, same, lambda k, c: G_CROSS[k], access)
    links = [Link(P_W, G_OWN[k], N0) for k in range(2)]
    return env, net, links


def run(env, net, links, bits, starts=(0.0, 0.0)):
    """Each client k sends bits[k] in cell k from starts[k]; finish times and rate steps."""
    finish, rates, stats = {}, {0: [], 1: []}, {0: {}, 1: {}}

    def client(k):
        yield env.timeout(starts[k])
        medium = net.medium(k)
        airtime = yield from medium.transmit(
            bits[k],
            links[k],
            on_rate=lambda rate, k=k: rates[k].append((env.now, rate)),
            client=k,
            stats=stats[k],
        )
        finish[k] = (env.now, airtime)

    for k in range(2):
        env.process(client(k))
    env.run()
    # the rate each client had from each instant on (the last change at that instant)
    steps = {k: list(dict(rates[k]).items()) for k in rates}
    return finish, steps, stats


def sinr_both():
    """SINR_k = p g_k / (N0 B + p G_j) with both transmitting (b = B, one per cell)."""
    return [P_W * G_OWN[k] / (N0 * B_HZ + P_W * G_CROSS[1 - k]) for k in range(2)]


def test_fully_overlapping_uploads_follow_the_closed_form_sinr():
    env, net, links = two_cells()
    sinr = sinr_both()
    rate = [B_HZ * math.log2(1 + s) for s in sinr]
    t_s = 2.0
    bits = [rate[0] * t_s, rate[1] * t_s]  # both end together at t_s
    finish, rates, stats = run(env, net, links, bits)
    for k in range(2):
        assert rates[k][0] == (0.0, pytest.approx(rate[k], rel=1e-12))
        assert finish[k][0] == pytest.approx(t_s, rel=1e-12)
        assert finish[k][1] == pytest.approx(t_s, rel=1e-12)
        assert stats[k]["sinr_mean"] == pytest.approx(sinr[k], rel=1e-12)
        assert stats[k]["sinr_min"] == pytest.approx(sinr[k], rel=1e-12)
    # interference lowers the rate below the noise-only Shannon rate
    assert rate[0] < B_HZ * math.log2(1 + P_W * G_OWN[0] / (N0 * B_HZ))


def test_rate_steps_up_when_the_other_cell_stops():
    env, net, links = two_cells()
    sinr = sinr_both()
    rate = [B_HZ * math.log2(1 + s) for s in sinr]
    alone = B_HZ * math.log2(1 + P_W * G_OWN[1] / (N0 * B_HZ))  # client 1 without interference
    bits = [rate[0] * 1.0, 4e6]  # client 0 ends at 1 s
    finish, rates, stats = run(env, net, links, bits)
    assert finish[0][0] == pytest.approx(1.0, rel=1e-12)
    # two-piece closed form: rate[1] until t1 = 1 s, then the interference-free rate
    t2 = 1.0 + (bits[1] - rate[1] * 1.0) / alone
    assert finish[1][0] == pytest.approx(t2, rel=1e-12)
    assert rates[1] == [
        (0.0, pytest.approx(rate[1], rel=1e-12)),
        (pytest.approx(1.0, rel=1e-12), pytest.approx(alone, rel=1e-12)),
    ]
    # time-mean SINR over the attempt and its minimum
    snr_alone = P_W * G_OWN[1] / (N0 * B_HZ)
    mean = (sinr[1] * 1.0 + snr_alone * (t2 - 1.0)) / t2
    assert stats[1]["sinr_mean"] == pytest.approx(mean, rel=1e-12)
    assert stats[1]["sinr_min"] == pytest.approx(sinr[1], rel=1e-12)


def test_a_late_start_slows_the_first_transmission_down():
    env, net, links = two_cells()
    sinr = sinr_both()
    rate = [B_HZ * math.log2(1 + s) for s in sinr]
    alone0 = B_HZ * math.log2(1 + P_W * G_OWN[0] / (N0 * B_HZ))
    bits = [8e6, 1e6]
    finish, rates, _ = run(env, net, links, bits, starts=(0.0, 0.5))
    # client 0 alone for 0.5 s, then both until client 1 ends, then alone again
    t1 = 0.5 + bits[1] / rate[1]
    left = bits[0] - alone0 * 0.5 - rate[0] * (t1 - 0.5)
    assert finish[1][0] == pytest.approx(t1, rel=1e-12)
    assert finish[0][0] == pytest.approx(t1 + left / alone0, rel=1e-12)
    assert [t for t, _ in rates[0]] == [0.0, pytest.approx(0.5), pytest.approx(t1)]


def test_fdma_in_a_cell_shares_the_band_and_sees_b_over_b_of_the_interference():
    env = simpy.Environment()
    same = cochannel_matrix(reuse_groups(2, 1))
    cross = {0: 3e-13, 1: 3e-13, 2: 5e-13}
    net = CochannelNetwork(env, B_HZ, same, lambda k, c: cross[k], "fdma")
    cells = [0, 0, 1]
    links = [Link(P_W, g, N0) for g in (2e-12, 2e-12, 1e-12)]
    seen = {}

    def client(k):
        yield from net.medium(cells[k]).transmit(
            1e6, links[k], on_rate=lambda rate, k=k: seen.__setitem__(k, rate), client=k
        )

    for k in range(3):
        env.process(client(k))
    env.run(until=1e-6)
    # cell 0: two clients on B/2 each; interference from client 2, a fraction (B/2)/B of it
    b0 = B_HZ / 2
    sinr0 = P_W * 2e-12 / (N0 * b0 + P_W * cross[2] * b0 / B_HZ)
    assert seen[0] == pytest.approx(b0 * math.log2(1 + sinr0), rel=1e-12)
    sinr2 = P_W * 1e-12 / (N0 * B_HZ + P_W * (cross[0] + cross[1]))
    assert seen[2] == pytest.approx(B_HZ * math.log2(1 + sinr2), rel=1e-12)


def test_reuse_3_on_7_cells_a_client_sees_only_its_co_channel_cells():
    groups = reuse_groups(7, 3)
    sites = hexagonal_sites(7, 1.0)
    same = cochannel_matrix(groups)
    for c in range(7):  # neighbours (one spacing apart) never share a group
        for d in range(7):
            distance = np.linalg.norm(sites[c] - sites[d])
            if c != d and distance < 1.01:
                assert groups[c] != groups[d]
            if same[c, d]:  # co-channel cells: sqrt(3 N) R = sqrt(N) spacings apart
                assert distance == pytest.approx(math.sqrt(3))
    env = simpy.Environment()
    cross = np.linspace(1e-13, 7e-13, 7)  # client k's gain to any other station
    net = CochannelNetwork(env, B_HZ, same, lambda k, c: cross[k], "fdma")
    links = [Link(P_W, 1e-12, N0) for _ in range(7)]
    seen = {}

    def client(k):
        yield from net.medium(k).transmit(
            1e9, links[k], on_rate=lambda rate, k=k: seen.__setitem__(k, rate), client=k
        )

    for k in range(7):
        env.process(client(k))
    env.run(until=1e-6)
    for c in range(7):
        interferers = [j for j in range(7) if j != c and groups[j] == groups[c]]
        assert interferers == list(np.flatnonzero(same[c]))
        sinr = P_W * 1e-12 / (N0 * B_HZ + P_W * sum(cross[j] for j in interferers))
        assert seen[c] == pytest.approx(B_HZ * math.log2(1 + sinr), rel=1e-12)
    assert same[0].sum() == 0  # the centre cell's group has no other member among 7
    assert sorted(np.bincount(groups).tolist()) == [1, 3, 3]


@pytest.mark.parametrize("n", [4, 7])
def test_reuse_4_and_7_neighbours_differ(n):
    groups = reuse_groups(19, n)
    sites = hexagonal_sites(19, 1.0)
    distance = np.linalg.norm(sites[:, None] - sites[None], axis=-1)
    neighbours = (distance > 0) & (distance < 1.01)
    assert not (neighbours & (groups[:, None] == groups[None, :])).any()
    same = cochannel_matrix(groups)
    assert distance[same].min() == pytest.approx(math.sqrt(n))  # D = sqrt(3 N) R
    assert len(set(groups.tolist())) == n


def test_reuse_needs_a_hexagonal_layout():
    with pytest.raises(FedjouleError, match="hexagonal"):
        reuse_groups(4, 3, "grid")


def test_tdma_queue_and_broadcast_interference():
    env = simpy.Environment()
    same = cochannel_matrix(reuse_groups(2, 1))
    net = CochannelNetwork(env, B_HZ, same, lambda k, c: G_CROSS[k], "broadcast", bs_power_w=1.0)
    links = [Link(1.0, G_OWN[k], N0) for k in range(2)]
    finish, rates, _ = run(env, net, links, [1e6, 1e6])
    for k in range(2):  # station 1 - k broadcasts too: interference P G_{k, 1-k}
        sinr = G_OWN[k] / (N0 * B_HZ + G_CROSS[k])
        assert rates[k][0][1] == pytest.approx(B_HZ * math.log2(1 + sinr), rel=1e-12)


def test_abort_reports_the_bits_sent():
    env, net, links = two_cells()
    sinr = sinr_both()
    rate0 = B_HZ * math.log2(1 + sinr[0])
    out = {}

    def client(k):
        try:
            yield from net.medium(k).transmit(1e9, links[k], client=k)
        except TransmissionAborted as stop:
            out[k] = stop

    procs = [env.process(client(k)) for k in range(2)]

    def stopper():
        yield env.timeout(0.25)
        procs[0].interrupt("deadline")
        procs[1].interrupt("deadline")

    env.process(stopper())
    env.run()
    assert out[0].airtime_s == pytest.approx(0.25)
    assert out[0].bits_sent == pytest.approx(rate0 * 0.25, rel=1e-12)
