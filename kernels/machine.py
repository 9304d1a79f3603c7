"""What launchers ask of the machine they run on, answered for the interpreter too.

A persistent grid has one program per streaming multiprocessor. Compiled, that is the GPU's count;
in the interpreter (CPU tensors) it is the count of the GPU this host has, when torch sees one, so
that a kernel interpreted beside its compiled run (the compiled-against-interpreted check) schedules
its tiles the same way; on a host without a GPU, a small fixed count.
"""

from __future__ import annotations

import torch

# the interpreter's program count where no GPU is present: small, as the interpreter runs programs
# one after another, and not a divisor of most tile counts
CPU_MULTIPROCESSORS = 3


def multiprocessors(device: torch.device) -> int:
    """The streaming multiprocessors a persistent grid over `device` spreads its programs over."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return CPU_MULTIPROCESSORS
