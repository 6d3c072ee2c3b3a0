"""Reading sweeps: the Table 2 style table with seeds and verdicts, per-row diagnostics, learning curves, the
Table 3 report, and attention functions compared at equal d_k. These modules only read run directories; they
train nothing."""
