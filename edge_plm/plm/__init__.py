"""Pure computation for the Precision Language Model (no I/O, no hardware)."""
