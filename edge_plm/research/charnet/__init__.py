"""The character-level SAFFU switch network (``network.SwitchNet``) and its configuration
(``config.CharNetConfig``): the measured alternative to the device's switch model, kept for the
kernel benchmarks and docs/benchmarks-log.md §1's comparison. The device does not run it
(docs/method.md, "The character network").
"""
