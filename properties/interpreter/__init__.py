"""Triton's CPU interpreter, made faithful (fixes) and exact about memory (sanitizer)."""
