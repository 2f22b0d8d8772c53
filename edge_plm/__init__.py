"""edge-plm: a voice-controlled switch that learns from its owner, on the device."""

__version__ = "0.1.0"
