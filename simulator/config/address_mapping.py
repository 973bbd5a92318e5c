"""Physical address -> (channel, bank group, bank, row, column), as plain data.

A mapping lists the fields from least to most significant above the 32 B access offset
(Ramulator's RoBaRaCoCh is ["channel", "column", "bankgroup", "bank", "row"]). Each field takes
its count's worth of the address by division, so channel counts that are not powers of two
(24 channels on a 384-bit bus) interleave by modulo, and power-of-two ones are bit fields.
A field may be split: "column:3" takes the next 3 bits for the column's lowest part, and the
plain "column" later takes the rest, as controllers that keep 256 B (8 accesses) on a channel
before moving to the next do.
`hash` entries fold a source field into a target, as GPUs do to spread strided streams: XOR
of all the source's bits, log2(count) at a time, where the target count is a power of two;
addition modulo the count otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.config.organization import Organization

FIELDS = ("channel", "bankgroup", "bank", "row", "column")
RAMULATOR_ROBARACOCH = ("channel", "column", "bankgroup", "bank", "row")
# Default: consecutive accesses rotate channels, then bank groups (so a stream alternates groups
# and reaches nCCDS), then columns of one row, then banks; channel and bank hashed with the row.
DEFAULT_FIELDS = ("channel", "bankgroup", "column", "bank", "row")
DEFAULT_HASH = (("channel", "row"), ("bankgroup", "row"), ("bank", "row"))


def parts(fields: tuple[str, ...]) -> list[tuple[str, int]]:
    """The fields as (name, bits) parts, least significant first; bits 0 for a field's plain
    name, which takes what its other parts leave. ValueError unless each field is named
    plainly exactly once."""
    out = []
    for f in fields:
        name, _, bits = f.partition(":")
        if name not in FIELDS or (bits and not (bits.isdigit() and int(bits) > 0)):
            raise ValueError(f"expected a field of {', '.join(FIELDS)}, optionally as "
                             f"'name:bits', got '{f}'")
        out.append((name, int(bits or 0)))
    plain = [name for name, bits in out if not bits]
    for name in FIELDS:
        if plain.count(name) != 1:
            raise ValueError(f"expected '{name}' once as a plain name, got it "
                             f"{plain.count(name)} times")
    return out


@dataclass(frozen=True)
class AddressMapping:
    fields: tuple[str, ...] = DEFAULT_FIELDS
    hash: tuple[tuple[str, str], ...] = DEFAULT_HASH
    # where the mapping is documented ("" for the default); not part of what it does
    source: str = field(default="", compare=False, repr=False)

    @property
    def cited(self) -> str:
        """Its source, or that it is the default, for reports."""
        return self.source or "none stated: the default of simulator/config/address_mapping.py"

    def __post_init__(self):
        parts(self.fields)

    def counts(self, org: Organization) -> dict[str, int]:
        return {"channel": org.channels, "bankgroup": org.bank_groups,
                "bank": org.banks_per_group, "row": org.rows, "column": org.columns}

    def split_counts(self) -> dict[str, int]:
        """Per field, the values its 'name:bits' parts take together (1 if none)."""
        return {name: 1 << sum(b for n, b in parts(self.fields) if n == name) for name in FIELDS}

    def check(self, org: Organization) -> None:
        """ValueError unless each split field's parts divide its count."""
        counts = self.counts(org)
        for name, split in self.split_counts().items():
            if counts[name] % split:
                raise ValueError(f"'{name}' has {counts[name]} values, which its parts of "
                                 f"{split} do not divide")

    def describe(self) -> str:
        """The fields, least significant first, and the hashes, as a line (a hash is an XOR
        fold where the target's count is a power of two, an addition modulo it otherwise)."""
        folds = ", ".join(f"{t} hashed with {s}" for t, s in self.hash) or "no hash"
        return f"{', '.join(self.fields)}; {folds}"

