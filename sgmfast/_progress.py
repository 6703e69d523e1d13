"""A minimal progress bar on stderr for long sweeps (no dependency).

The bar redraws itself with ``\\r``, which only a terminal (or a Jupyter cell) understands: written
to a file, a pipe or a CI log it would leave one long line of overwritten bars. So it is drawn
live only on a terminal; elsewhere a bar that was asked for (``enabled=True``) writes one plain
line when it is done, and a bar left to decide (``enabled=None``) writes nothing.
"""

from __future__ import annotations

import sys
import time


class Progress:
    """``with Progress(total, "calibrating") as p: p.update(n)``; silent when disabled.

    Parameters
    ----------
    total : int
        Number of items.
    label : str
        Text before the bar.
    enabled : bool or None
        None: on when stderr is a terminal and the sweep is long (``total >= min_total``).
        True: a live bar on a terminal, one summary line at the end anywhere else.
    """

    def __init__(self, total: int, label: str, enabled: bool | None = None, min_total: int = 2000,
                 stream=None):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        live = _is_terminal(self.stream)
        if enabled is None:
            enabled = total >= min_total and live
        self.enabled = bool(enabled)
        self.live = self.enabled and live  # (redrawn with \r; else one line at the end)
        self.done = 0
        self._t0 = time.monotonic()
        self._last = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.live:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
        elif self.enabled:
            elapsed = time.monotonic() - self._t0
            self.stream.write(f"{self.label}: {self.done}/{self.total} in {elapsed:.1f}s\n")
            self.stream.flush()
        return False

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.live:
            self._draw()

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        frac = min(self.done / self.total, 1.0)
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        elapsed = now - self._t0
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s eta {eta:5.1f}s")
        self.stream.flush()


def _is_terminal(stream) -> bool:
    """Whether ``\\r`` redraws in place on ``stream``: a terminal, or a Jupyter cell's stream
    (ipykernel's, which renders ``\\r`` though it is no tty)."""
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError, OSError):  # (no isatty, or a closed stream)
        return False
    return type(stream).__module__.split(".")[0] == "ipykernel"
