"""How a calibration reaches a model: the fast attention function and the nnsight reference."""
