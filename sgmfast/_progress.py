"""A minimal progress bar on stderr for long sweeps (no dependency)."""

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
    """

    def __init__(self, total: int, label: str, enabled: bool | None = None, min_total: int = 2000,
                 stream=None):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = total >= min_total and getattr(self.stream, "isatty", lambda: False)()
        self.enabled = bool(enabled)
        self.done = 0
        self._t0 = time.monotonic()
        self._last = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
        return False

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.enabled:
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
