"""The suite measuring itself and the hardware: mutation hunts, the fixed-grid baseline, accumulation probes."""
