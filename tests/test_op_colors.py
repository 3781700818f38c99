"""A stream chart's op colours (roofs/charts/kit.py op_colors): the named kernels keep theirs,
and a kernel the table does not name (a new Kind row) gets a colour no other op of the chart
holds, never the shared grey."""
from roofs.charts.kit import OP_COLORS, SPARE_OP_COLORS, op_colors


def test_named_ops_keep_their_colour_and_new_ones_get_a_spare_each():
    got = op_colors(["triad", "nstream", "copy", "zeta", "nstream"])
    assert got == {"copy": "tab:blue", "triad": "tab:purple", "nstream": "tab:olive", "zeta": "tab:gray"}
    assert len(set(op_colors(list(OP_COLORS) + ["nstream"]).values())) == len(OP_COLORS) + 1
    assert not set(SPARE_OP_COLORS) & set(OP_COLORS.values())
