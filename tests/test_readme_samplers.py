"""The README's sampler table is the committed script's output (``bench/samplers_mnist.py`` writes
``docs/samplers_mnist.md``) and every interval in it is what the code returns at 60 epochs."""

from __future__ import annotations

import pathlib
import re
import warnings

import pytest

from sgmfast import pld

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _table_rows():
    table = (ROOT / "docs" / "samplers_mnist.md").read_text()
    return table, re.findall(r'`"(\w+)"` \| ([\w-]+) \| \[([\d.]+), ([\d.]+)\]', table)


def test_readme_carries_the_generated_table():
    table, rows = _table_rows()
    assert table in (ROOT / "README.md").read_text()
    assert [r[0] for r in rows] == ["poisson", "balls_in_bins", "shuffle", "fixed_size"]


@pytest.mark.parametrize("sampler, relation, lo, up", _table_rows()[1], ids=lambda x: str(x))
def test_table_intervals_are_what_the_code_returns(sampler, relation, lo, up):
    q = 256 / 60000 if sampler == "fixed_size" else 1 / 234
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pld.LooseBoundWarning)
        b = pld.epsilon(1.1, q, 60 * 234, 1e-5, sampler=sampler, relation=relation.replace("-", "_"))
    assert float(lo) <= b.lower < float(lo) + 1e-4 and float(up) - 1e-4 < b.upper <= float(up)  # rounded outwards
