"""Uplink open-loop fractional power control: each client's transmit power from its path
loss and its share of the uplink band (docs/models.md#uplink-power-control).

`population.device_classes[].radio.power_control`:

- `none` (default): every client sends at its class's maximum power p_max (tx_power_dbm).
- `fractional`: the 3GPP open-loop PUSCH power (TS 36.213 sec. 5.1.1.1, LTE; TS 38.213
  sec. 7.1.1, NR), without the closed-loop and transport-format terms (f = 0, Delta_TF = 0):

      P = min(p_max, P0 + alpha PL + 10 log10(M))            [dBm]

  PL: the client's path loss with its shadowing to its serving base station (the channel's
  large-scale gain; the UE estimates it from the reference signal's received power, whose
  filtering averages the fast fading out). M: the number of resource blocks of the
  client's band b, M = b / 180 kHz: an LTE resource block is 12 subcarriers of 15 kHz
  (TS 36.211); in NR the term is 10 log10(2^mu M_RB) and a resource block at numerology
  mu is 12 x 15 x 2^mu kHz, so 2^mu M_RB = b / 180 kHz at every numerology (mu = 0: 15 kHz
  subcarriers, 180 kHz blocks; mu = 1: 30 kHz, 360 kHz). P0 is thus the target received
  power per 180 kHz. M is not rounded: b is the client's typical share of the band
  (simulator/transfers.typical_bandwidth_hz), a mean over allocations of whole blocks.

Defaults: P0 = -80 dBm and alpha = 1 (full path-loss compensation), the defaults of the
ns-3 LTE module's LteUePowerControl (attributes PoNominalPusch -80 and Alpha 1.0, checked
in its source; 5G-LENA's NrUePowerControl has the same PoNominalPusch default). Ranges:
P0 in [-126, 24] dBm, the range of p0-NominalPUSCH (TS 36.331; the same in ns-3); alpha
in [0, 1] (3GPP signals 0, 0.4, 0.5, ..., 1; any value between is accepted for studies).

The power is set once per client (its path loss and typical band do not change during a
run) and enters everything the class's p entered before: the SNR and SINR, the rate, the
interference the client causes to other cells, and the radiated and linear radios' energy.
The measured radios (lte, wifi, nbiot) refuse it: their power is a measured function of
the throughput, taken on phones whose network already ran its power control, and the
radiated power is not an input of it (schema.RadioSection).
"""

import numpy as np

from fedjoule.channel.units import dbm_to_w, linear_to_db

RESOURCE_BLOCK_HZ = 180e3  # LTE: 12 subcarriers x 15 kHz (TS 36.211); NR: per 2^mu blocks
DEFAULT_P0_DBM = -80.0  # ns-3 LteUePowerControl PoNominalPusch (and 5G-LENA's)
DEFAULT_ALPHA = 1.0  # ns-3 LteUePowerControl Alpha: full path-loss compensation


def fractional_power_dbm(
    p_max_dbm, path_loss_db, bandwidth_hz, p0_dbm: float, alpha: float
) -> np.ndarray:
    """P = min(p_max, P0 + alpha PL + 10 log10(b / 180 kHz)) in dBm (TS 36.213 5.1.1.1)."""
    m = np.asarray(bandwidth_hz, dtype=float) / RESOURCE_BLOCK_HZ
    open_loop = p0_dbm + alpha * np.asarray(path_loss_db, dtype=float) + 10.0 * np.log10(m)
    return np.minimum(p_max_dbm, open_loop)


def in_use(population_section) -> bool:
    """Whether any device class runs fractional power control."""
    return any(c.radio.power_control == "fractional" for c in population_section.device_classes)


def tx_power_w(population_section, population, large_scale_gain, bandwidth_hz) -> np.ndarray:
    """(N,) each client's uplink transmit power (W): the population's (its class's p_max),
    or in a class under fractional power control min(p_max, P0 + alpha PL + 10 log10(M))
    with PL = -10 log10(large_scale_gain) and M = bandwidth_hz / 180 kHz (per client)."""
    power_w = population.tx_power_w.copy()
    path_loss_db = -linear_to_db(large_scale_gain)
    band_hz = np.broadcast_to(np.asarray(bandwidth_hz, dtype=float), power_w.shape)
    for i, c in enumerate(population_section.device_classes):
        radio = c.radio
        if radio.power_control != "fractional":
            continue
        rows = population.class_index == i
        p0 = DEFAULT_P0_DBM if radio.p0_dbm is None else radio.p0_dbm
        alpha = DEFAULT_ALPHA if radio.alpha is None else radio.alpha
        open_loop_dbm = fractional_power_dbm(np.inf, path_loss_db[rows], band_hz[rows], p0, alpha)
        # the clip in watts keeps p_max itself (dbm_to_w(tx_power_dbm)) bit for bit
        power_w[rows] = np.minimum(dbm_to_w(c.tx_power_dbm), dbm_to_w(open_loop_dbm))
    return power_w
