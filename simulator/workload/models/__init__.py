"""Model generators: each turns a `model` block (checked by simulator/config/models.py as the
file loads) into forward ops on a TraceBuilder."""
