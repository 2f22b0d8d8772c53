"""GPIO devices (relay, switch, status LED) over gpiozero pin factories."""
