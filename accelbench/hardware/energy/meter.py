"""A meter over one timed window: the source's counters read at the window's edges, and on a
background thread in between (peak power, and RAPL's wrap-around read often enough).

The window's joules are the counters' differences at its edges; its average watts those joules
over its length; its peak watts the highest power the hardware reported (NVML, HLML) or, for a
counter-only source, the highest rate between two samples. A window shorter than
SHORT_WINDOW_INTERVALS of the counter's update interval is flagged too short: its joules are
dominated by when the counter last moved.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

from accelbench.hardware.energy.source import EnergySource, Unavailable
from accelbench.hardware.energy_window import EnergyWindow

SHORT_WINDOW_INTERVALS = 10
SAMPLE_S = 0.1  # the sampler's period (at least the counter's own interval)
Sample = tuple[float, tuple[float, ...], tuple[float, ...] | None]  # (s, joules, watts)


def _peaks(samples: list[Sample], n: int) -> tuple[float, ...]:
    """Highest reported watts per device, else the highest rate between two samples."""
    reported = [w for _, _, w in samples if w is not None]
    if reported:
        return tuple(max(w[i] for w in reported) for i in range(n))
    rates = [tuple((b[1][i] - a[1][i]) / (b[0] - a[0]) for i in range(n))
             for a, b in zip(samples, samples[1:], strict=False) if b[0] > a[0]]
    return tuple(max(r[i] for r in rates) if rates else 0.0 for i in range(n))


def _mean_clocks(clocks: list[tuple[float, ...]]) -> tuple[float, ...] | None:
    """Each device's mean over the clock samples (taken with the power samples), or None."""
    if not clocks:
        return None
    return tuple(sum(c[i] for c in clocks) / len(clocks) for i in range(len(clocks[0])))


def window_from_samples(source: EnergySource, host: str, samples: list[Sample],
                        clocks: list[tuple[float, ...]] | None = None) -> EnergyWindow:
    """The window's figures from its samples, the first and last at its edges; `clocks` the
    SM clocks read with them, where the source reads clocks."""
    (t0, j0, _), (t1, j1, _) = samples[0], samples[-1]
    duration = t1 - t0
    joules = tuple(b - a for a, b in zip(j0, j1, strict=True))
    avg = tuple(j / duration if duration > 0 else 0.0 for j in joules)
    return EnergyWindow(source.name, source.interval_s, host, source.host_wide,
                        tuple(source.devices), duration, joules, avg,
                        _peaks(samples, len(joules)), len(samples),
                        duration < SHORT_WINDOW_INTERVALS * source.interval_s,
                        _mean_clocks(clocks or []))


class EnergyMeter:
    """Start and stop around a timed window; the source is closed with the meter."""

    def __init__(self, source: EnergySource | Unavailable,
                 clock: Callable[[], float] = time.perf_counter,
                 sample_s: float | None = SAMPLE_S) -> None:
        self.source, self._clock, self._sample_s = source, clock, sample_s
        self._samples: list[Sample] = []
        self._clocks: list[tuple[float, ...]] = []  # SM clocks, where the source reads them
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.window: EnergyWindow | None = None
        self.failure: str | None = None  # a reading at an edge that failed: why

    def _power(self) -> tuple[float, ...] | None:
        """Reported watts, None where the hardware refuses (a board without power readings)."""
        try:
            return self.source.power_w()
        except Exception:
            return None

    def _sample(self) -> Sample:
        power = self._power()  # read first: the counter's reading closes the sample
        self._read_clock()
        return self._clock(), self.source.read_j(), power

    def _read_clock(self) -> None:
        """The SM clock beside each power reading (NVML); a failed read leaves a gap."""
        read = getattr(self.source, "sm_clock_mhz", None)
        if read is None:
            return
        try:
            self._clocks.append(tuple(read()))
        except Exception:  # noqa: BLE001 - a clock never fails the cell it describes
            return

    def _edge(self) -> bool:
        """A sample at a window's edge; False (and why, kept) when the counter failed: the
        cell goes on, its energy unavailable."""
        try:
            self._samples.append(self._sample())
            return True
        except Exception as err:
            self.failure = f"{self.source.name} counter read failed: {err}"
            return False

    def _run(self) -> None:
        period = max(self._sample_s or 0.0, self.source.interval_s)
        while not self._stop.wait(period):
            try:
                self._samples.append(self._sample())
            except Exception:  # a failed reading leaves a gap; the edges decide the joules
                continue

    def start(self) -> None:
        """Open the window (call after synchronising the device)."""
        if isinstance(self.source, Unavailable):
            return
        self._samples, self._clocks = [], []
        if self._edge() and self._sample_s:
            self._thread = threading.Thread(target=self._run, name="energy-meter", daemon=True)
            self._thread.start()

    def stop(self) -> EnergyWindow | None:
        """Close the window (after synchronising the device); its figures, None unstarted."""
        if isinstance(self.source, Unavailable) or not self._samples:
            return None
        self._halt()
        if not self._edge():
            return None
        self.window = window_from_samples(self.source, socket.gethostname(), self._samples,
                                          self._clocks)
        return self.window

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def result(self) -> dict:
        """What a rank reports: the window's figures, or 'unavailable' with the reason."""
        if isinstance(self.source, Unavailable):
            return {"unavailable": self.source.reason}
        if self.window is None:
            return {"unavailable": self.failure or "no timed window was measured"}
        return self.window.to_dict()

    def close(self) -> None:
        """Stop the sampler and release the source."""
        self._halt()
        if not isinstance(self.source, Unavailable):
            try:
                self.source.close()
            except Exception:  # releasing a library never fails the cell it metered
                pass

    def __enter__(self) -> EnergyMeter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
