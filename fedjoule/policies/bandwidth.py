"""Bandwidth allocators: each selected client's share of the cell's uplink band (FDMA), on the
channel's own rate model (channel/link.py): equal and equal-finish (min-energy: min_energy.py)."""

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, root_scalar

from fedjoule.channel.link import NOISE_PSD_W_PER_HZ, airtime_s, shannon_rate_bps, snr_linear

# Bisection on a share or a time halves its interval until the two ends are adjacent
# floats; 200 halvings bound it (a share in (0, 1] needs fewer than 1100 only below 1e-300).
BISECTION_STEPS = 200
# share_estimate's Newton steps (5 reach round-off from its start, for any 1e-9 < k < 1) and
# the relative bracket around its estimate that share_for_time checks and bisects.
NEWTON_STEPS = 6
ESTIMATE_BRACKET = 1e-13
# equal-finish's joint Newton: its most steps, and the relative step (in 1/T and in each
# u_k) it stops below (quadratic: the step after would be at round-off)
JOINT_STEPS = 40
JOINT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Uplink:
    """The selected clients' uplink in one cell, arrays over them, for the allocators.

    The rate of a client on a share s of the band W is the channel's (channel/link.py):
    Shannon b log2(1 + SNR) on b = s W, where SNR = P_rx / (N0 b) falls as the share grows
    (noise power scales with bandwidth) when `rx_power_w` is given (geometry), or is the
    scenario's fixed `snr` whatever the share; b r at a fixed spectral efficiency r
    (channel.rate=fixed). Under co-channel interference pass N0 + I / W as the noise PSD
    (channel/interference.py: an interferer's power I spreads over the whole band)."""

    bits: np.ndarray  # (m,) bits each uploads
    tx_power_w: np.ndarray  # (m,) its transmit power p
    bandwidth_hz: float  # W, the cell's uplink band
    rx_power_w: np.ndarray | None = None  # (m,) p x gain at the base station
    noise_psd_w_per_hz: float | np.ndarray = NOISE_PSD_W_PER_HZ
    snr: np.ndarray | None = None  # (m,) linear, fixed whatever the share
    fixed_se_bps_per_hz: float | None = None

    def __post_init__(self) -> None:
        if self.rx_power_w is None and self.snr is None and self.fixed_se_bps_per_hz is None:
            raise ValueError("an Uplink needs rx_power_w, snr or fixed_se_bps_per_hz")

    @property
    def n(self) -> int:
        return len(np.atleast_1d(self.bits))

    @property
    def linear(self) -> bool:
        """Whether the rate is proportional to the share (fixed SNR or spectral efficiency)."""
        return self.fixed_se_bps_per_hz is not None or self.rx_power_w is None

    def rate_bps(self, share: np.ndarray, client: int | None = None) -> np.ndarray:
        """Each client's rate on its share of the band (0 on a share of 0); with `client`,
        that one client's rate on each of the shares `share`."""
        band_hz = np.asarray(share, dtype=float) * self.bandwidth_hz
        if self.fixed_se_bps_per_hz is not None:
            return band_hz * self.fixed_se_bps_per_hz
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.rx_power_w is None:
                snr = self.snr if client is None else self.snr[client]
            else:
                rx_w, noise = self.rx_power_w, np.asarray(self.noise_psd_w_per_hz)
                if client is not None:
                    rx_w, noise = rx_w[client], noise[client] if noise.ndim else noise
                snr = snr_linear(rx_w, noise, band_hz)
            return np.where(band_hz > 0, shannon_rate_bps(band_hz, snr), 0.0)

    def rate_slope_bps(self, share: np.ndarray) -> np.ndarray:
        """d rate / d share: W log2(1 + SNR) at a fixed SNR; with SNR = a / s over the share
        (a the SNR on the whole band), W (log2(1 + a/s) - (a/s) / ((1 + a/s) ln 2))."""
        if self.linear:
            return self.rate_bps(np.ones(self.n))
        x = snr_linear(self.rx_power_w, self.noise_psd_w_per_hz, share * self.bandwidth_hz)
        return self.bandwidth_hz * (np.log2(1.0 + x) - x / ((1.0 + x) * np.log(2.0)))

    def upload_time_s(self, share: np.ndarray) -> np.ndarray:
        """bits / rate (inf on a share of 0)."""
        return airtime_s(self.bits, self.rate_bps(share))

    def tx_energy_j(self, share: np.ndarray) -> np.ndarray:
        """Radiated energy p x upload time (link.Link.tx_energy_j, per client)."""
        return self.tx_power_w * self.upload_time_s(share)


def equal_shares(uplink: Uplink) -> np.ndarray:
    """1/m of the band each (today's FDMA split among m clients sending together)."""
    return np.full(uplink.n, 1.0 / uplink.n)


def share_for_time(uplink: Uplink, time_s) -> np.ndarray:
    """Per client the least share of the band on which its upload takes at most time_s
    (a number or one per client): inf where even the whole band is too slow. Bisection
    on the upload time, which falls as the share grows, to adjacent floats, from a bracket
    around share_estimate (a few halvings) or, where the test does not confirm it, (0, 1)."""
    time_s = np.broadcast_to(np.asarray(time_s, dtype=float), (uplink.n,))
    feasible = uplink.upload_time_s(np.ones(uplink.n)) <= time_s
    guess = share_estimate(uplink, time_s)
    low, high = guess * (1.0 - ESTIMATE_BRACKET), np.minimum(guess * (1.0 + ESTIMATE_BRACKET), 1)
    with np.errstate(invalid="ignore"):
        confirmed = (low > 0) & (uplink.upload_time_s(low) > time_s)
        confirmed &= uplink.upload_time_s(high) <= time_s
    low, high = np.where(confirmed, low, 0.0), np.where(confirmed, high, 1.0)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (low + high)
        if np.all((mid == low) | (mid == high)):
            break
        fits = uplink.upload_time_s(mid) <= time_s
        low, high = np.where(fits, low, mid), np.where(fits, mid, high)
    return np.where(feasible, high, np.inf)


def share_estimate(uplink: Uplink, time_s) -> np.ndarray:
    """Per client the share on which its upload takes time_s, to a few ulps (nan or inf
    where none does). Linear rate: bits / (time_s x its rate on the whole band). SNR over
    the share: s log2(1 + a/s) = bits / (W time_s), a the SNR on the whole band; with
    u = a/s, ln(1 + u) = k u, k = bits ln 2 / (W time_s a) < 1, solved by Newton's method
    from u0 = 2 ln(1/k) / k, right of the root (ln(1 + u0) <= k u0 as y^2 - 1 >= 2 y ln y,
    y = 1/k), where ln(1 + u) - k u is concave and falling, so the steps fall monotonically
    to the root."""
    if uplink.linear:
        return uplink.bits / (time_s * uplink.rate_bps(np.ones(uplink.n)))
    a = snr_linear(uplink.rx_power_w, uplink.noise_psd_w_per_hz, uplink.bandwidth_hz)
    k = uplink.bits * np.log(2.0) / (uplink.bandwidth_hz * time_s * a)
    with np.errstate(all="ignore"):
        return a / snr_on_share(k)


def snr_on_share(k: np.ndarray, steps: int = NEWTON_STEPS) -> np.ndarray:
    """share_estimate's u = a/s: the root of ln(1 + u) = k u by `steps` Newton steps from
    2 ln(1/k) / k (call it under np.errstate: nan where k >= 1)."""
    u = -2.0 * np.log(k) / k
    for _ in range(steps):
        u = u - (np.log1p(u) - k * u) / (1.0 / (1.0 + u) - k)
    return u


def newton_in(excess_and_slope, start: float, low: float, high: float, tolerance: dict):
    """scipy.optimize.root_scalar's Newton method from `start` (excess_and_slope gives the
    function and its derivative): its root where it converges inside [low, high], else
    None (the caller then brackets it with brentq)."""
    with np.errstate(all="ignore"):
        try:
            found = root_scalar(
                excess_and_slope, x0=start, fprime=True, method="newton", maxiter=30, **tolerance
            )
        except (ArithmeticError, ValueError, RuntimeError):
            return None
    return found.root if found.converged and low <= found.root <= high else None


def equal_finish_shares(uplink: Uplink) -> np.ndarray:
    """Shares that end every upload at the same instant T (uploads starting together),
    which minimise the longest upload time with the shares summing to 1.

    Rate linear in the share (fixed SNR): t_k = bits_k / (s_k W log2(1 + snr_k)) equal
    gives s_k proportional to bits_k / log2(1 + snr_k), in closed form. SNR over the share
    (noise scales with bandwidth): T solves sum_k s_k(T) = 1, s_k(T) the share on which
    client k's upload takes T, between the longest upload on the whole band and the longest
    on equal shares, so it is never longer than equal's (where it is not shorter, equal's
    shares are returned). Newton's method on T and the shares together (joint_newton), a
    few steps from the longest upload on the whole band; where it does not converge,
    scipy's root finders on share_estimate and share_for_time (bracketed_equal_finish)."""
    if uplink.linear:
        need = uplink.bits / uplink.rate_bps(np.ones(uplink.n))
        return need / need.sum()
    if uplink.n == 1:
        return equal_shares(uplink)
    shares = joint_newton(uplink)
    return bracketed_equal_finish(uplink) if shares is None else shares


def joint_newton(uplink: Uplink) -> np.ndarray | None:
    """Equal-finish's shares by Newton's method on tau = 1/T and u_k = a_k / s_k (the SNR on
    the share, a_k the SNR on the whole band) together: g_k = ln(1 + u_k) / u_k - beta_k tau
    = 0 with beta_k = bits_k ln 2 / (W a_k) (s W log2(1 + a/s) = bits / T), and
    h = 1 - 1 / sum_k a_k / u_k = 0 (the shares fill the band; 1/S rather than S - 1, as
    near a client's least time its share grows like a pole, which 1/S makes nearly
    linear: 1-2 steps fewer). The Jacobian is an arrow (each u_k meets only tau), so a step
    is O(m): with D_k = u_k / (1 + u_k) - ln(1 + u_k) (u_k^2 dg_k/du_k) and w_k = a_k / D_k,
    d_tau = (S (S - 1) + sum w_k g_k) / sum w_k beta_k, du_k = (beta_k d_tau - g_k) u_k^2 / D_k.
    It starts at the longest upload on the whole band, u_k two of share_estimate's steps
    there (left of the root: the sum of shares is convex and falling in T); about 5 steps
    reach round-off. The shares are then scaled to sum to 1 (moved down by an ulp while
    round-off leaves their sum above 1). None where it does not converge within
    JOINT_STEPS or ends on a share or tau of 0 or less."""
    a = snr_linear(uplink.rx_power_w, uplink.noise_psd_w_per_hz, uplink.bandwidth_hz)
    bits_nats = uplink.bits * (np.log(2.0) / uplink.bandwidth_hz)  # the upload time x rate
    beta = bits_nats / a  # s, the upload on an unlimited band
    with np.errstate(all="ignore"):
        tau = 1.0 / float(np.max(bits_nats / np.log1p(a)))  # the longest on the whole band
        u = snr_on_share(beta * tau, steps=2)
        for _ in range(JOINT_STEPS):
            log_term = np.log1p(u)
            slope = u / (1.0 + u) - log_term
            weight = a / slope
            g = log_term / u - beta * tau
            total = float((a / u).sum())
            step = (total * (total - 1.0) + float(weight @ g)) / float(weight @ beta)
            move = (beta * step - g) * (u * u / slope)
            u = u + move
            tau += step
            if abs(step) <= JOINT_TOLERANCE * tau and np.max(np.abs(move) / u) <= JOINT_TOLERANCE:
                break
        else:
            return None
        shares = a / u
    if not (tau > 0 and np.all(shares > 0)):  # converged: the one root (S rises with tau)
        return None
    shares = shares / shares.sum()
    while shares.sum() > 1.0:  # round-off: an ulp down each (every finish moves by ulps)
        shares = np.nextafter(shares, 0.0)
    if shares.min() * uplink.n >= 1.0 - 1e-9:  # near equal's: equal's may be the least
        equal = equal_shares(uplink)
        if np.max(uplink.upload_time_s(shares)) >= np.max(uplink.upload_time_s(equal)):
            return equal
    return shares


def bracketed_equal_finish(uplink: Uplink) -> np.ndarray:
    """Equal-finish's shares where joint_newton does not converge: T by scipy's Newton
    method (root_scalar) on share_estimate from the lower end (each s_k(T) is convex and
    falling, so the steps climb to the root without overshooting), scipy.optimize.brentq
    in the bracket where it does not converge; T then moves up by 1, 2, 4, ... ulps until
    share_for_time's shares fit the band."""
    alone_s = float(np.max(uplink.upload_time_s(np.ones(uplink.n))))
    equal_s = float(np.max(uplink.upload_time_s(equal_shares(uplink))))

    def excess(time_s: float, estimate: bool = False) -> float:
        shares = (share_estimate if estimate else share_for_time)(uplink, time_s)
        return float(shares.sum()) - 1.0

    # equal's longest is already the least (checked exactly where the estimate is close)
    if uplink.n == 1 or (not excess(equal_s, True) <= -1e-9 and excess(equal_s) >= 0):
        return equal_shares(uplink)
    tolerance = {"xtol": 1e-300, "rtol": 4 * np.finfo(float).eps}
    a = snr_linear(uplink.rx_power_w, uplink.noise_psd_w_per_hz, uplink.bandwidth_hz)

    def excess_and_slope(time_s: float) -> tuple[float, float]:
        # s ln(1 + a/s) = bits ln 2 / (W T): ds/dT = -s ln(1 + x) / (T (ln(1 + x) - x/(1 + x)))
        shares = share_estimate(uplink, time_s)
        x = a / shares
        slope = -shares * np.log1p(x) / (time_s * (np.log1p(x) - x / (1.0 + x)))
        return float(shares.sum()) - 1.0, float(slope.sum())

    # each s_k(T) is convex and falling, so is their sum: Newton from alone_s (left of the
    # root) climbs to it without overshooting
    time_s = newton_in(excess_and_slope, alone_s, alone_s, equal_s, tolerance)
    if time_s is None:
        try:
            time_s = brentq(excess, alone_s, equal_s, args=(True,), **tolerance)
        except ValueError:  # the estimate did not change sign: the exact shares
            time_s = brentq(excess, alone_s, equal_s, **tolerance)
    for i in range(64):  # the root may sit some floats on the crowded side
        shares = share_for_time(uplink, time_s)
        if shares.sum() <= 1.0:
            break
        time_s = min(time_s * (1.0 + 2.0**i * np.finfo(float).eps), equal_s)
    return shares
