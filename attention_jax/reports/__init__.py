"""Reading sweeps: the Table 2 style table with seeds and verdicts, per-row diagnostics, learning curves,
and the Table 3 report. These modules only read run directories; they train nothing."""
