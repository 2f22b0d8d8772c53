"""The device's loop: the controller (one input -> one stored interaction), its per-device
outcomes, the service around it, replays and try-outs of it, and the stop flag."""
