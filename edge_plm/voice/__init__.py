"""Audio sources, endpointing and ASR backends."""
