"""``zerorename perf tune``: the scenario (``scenario``), the model and its noise-aware
pick (``model``), the grid and its extension to the knee (``grid``)."""
