"""Studies made of many runs: sweeps over a base config, and the paper's Table 1."""
