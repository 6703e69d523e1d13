"""The batch samplers, in one table: what each draws, the neighbouring relations its analysis is
for, which engines account for it, and whether its interval is tight.

Every other module asks this table (the PLD and RDP accountants, calibration, the CLI and the
Opacus adapter); ``sgmfast.pld.samplers`` holds the certifier of each.

============= ====================================== ================================ ==========
sampler       batches                                relations (first: the default)   engines
============= ====================================== ================================ ==========
poisson       each example in each step with         add_remove, replace_one          pld, rdp
              probability q                          (rdp: add_remove)                (tight)
balls_in_bins every epoch, each example joins one    add_remove                       pld (tight)
              of the 1/q batches at random
shuffle       every epoch a random permutation cut   zero_out, replace_one            pld (sound,
              into 1/q batches of a fixed size                                        loose)
fixed_size    b = q n examples drawn without         replace_one                      pld, rdp
              replacement, independently each step                                    (tight)
============= ====================================== ================================ ==========
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sampler:
    name: str
    #: engine -> the relations it accounts this sampler under, the sampler's own first
    relations: dict
    #: certified to the requested accuracy (else: sound, possibly wide)
    tight: bool
    #: q is 1/t for t whole batches per epoch
    per_epoch: bool

    @property
    def cli(self) -> str:
        """The command-line spelling."""
        return self.name.replace("_", "-")

    @property
    def own_relation(self) -> str:
        return self.relations["pld"][0]

    @property
    def engines(self) -> tuple:
        return tuple(self.relations)


TABLE = {s.name: s for s in (
    Sampler("poisson", {"pld": ("add_remove", "replace_one"), "rdp": ("add_remove",)}, True, False),
    Sampler("balls_in_bins", {"pld": ("add_remove",)}, True, True),
    Sampler("shuffle", {"pld": ("zero_out", "replace_one")}, False, True),
    Sampler("fixed_size", {"pld": ("replace_one",), "rdp": ("replace_one",)}, True, False),
)}
SAMPLERS = tuple(TABLE)
#: samplers whose q is 1/t for t whole batches per epoch
EPOCH_SAMPLERS = tuple(s.name for s in TABLE.values() if s.per_epoch)
ENGINES = ("pld", "rdp")


def get(sampler: str) -> Sampler:
    """The table's row, or a ValueError naming the parameter."""
    if sampler not in TABLE:
        raise ValueError(f"sampler must be one of {SAMPLERS}; got {sampler!r}")
    return TABLE[sampler]


def samplers_of(engine: str) -> tuple:
    """The samplers ``engine`` accounts for."""
    return tuple(s.name for s in TABLE.values() if engine in s.relations)


def check_engine(sampler: str, engine: str) -> Sampler:
    """The row of ``sampler`` if ``engine`` accounts for it, else a ValueError naming what is wrong."""
    row = get(sampler)
    if engine not in row.relations:
        allowed = repr(row.engines[0]) if len(row.engines) == 1 else f"one of {row.engines}"
        raise ValueError(f"accountant must be {allowed} for sampler {sampler!r} (the {engine.upper()} "
                         f"engine accounts for {samplers_of(engine)}); e.g. pld.epsilon(..., sampler={sampler!r})")
    return row


def resolve(sampler: str, relation: str | None, engine: str = "pld") -> str:
    """The relation to use: ``relation``, or the sampler's own when None; a ValueError naming the
    parameter for an unknown sampler, an engine without a bound for it, or a relation it is not
    analysed under."""
    allowed = check_engine(sampler, engine).relations[engine]
    if relation is None:
        return allowed[0]
    if relation not in allowed:
        on = "" if engine == "pld" else f" with the {engine.upper()} accountant"
        raise ValueError(f"relation {relation!r} is not available for sampler {sampler!r}{on} (allowed: {allowed})")
    return relation
