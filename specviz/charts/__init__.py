"""Figure builders, by what they show. Pure: data in, figure out; pages only place them.

    acceptance   one run's acceptance per draft position (plotly)
    timeline     one request's accepted drafts per step, with a brush for the step rows (altair)
    sweeps       a sweep table: throughput, speedup, acceptance and latency against k and concurrency
    tuning       a tuning prediction against the measured cells
    textbook     Leviathan et al.'s formulas (E(k), speedup, break-even α) against a run and a sweep
    style        the shared look: colour by drafter, dash and marker by k, short labels, large type

Import the module that holds the figure: `from specviz.charts import sweeps as sweep_charts`.
"""
