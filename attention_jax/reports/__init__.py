"""Reading sweeps: a generic core (rows, pairing by seed, statistics, verdicts, tables, plots, transfer)
and what a sweep file's ``get_report()`` adds. These modules only read run directories; they train nothing.
"""
