"""Act / ask / ignore: the decision state machine per device and the junk rule. No I/O."""
