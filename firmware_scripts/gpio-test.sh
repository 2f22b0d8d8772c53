#!/usr/bin/env bash
# GPIO check: click the relay N times, then report presses of the person's switch.
#
# Usage: firmware_scripts/gpio-test.sh [-n N] [--interval S] [--watch S] [--config FILE]
#                                      [--relay PIN] [--switch PIN] [--python PY] [--force]
#   -n N          relay clicks (on, then off) (default 3)
#   --interval S  seconds between relay changes (default 1; the relay module must keep up)
#   --watch S     seconds to watch the switch after the clicks (default 10): flip/press it now
#   --config FILE pins, polarity and pin factory from this config (default: the usual lookup,
#                 /etc/edge-plm/config.toml for an installed device)
#   --relay PIN / --switch PIN   override the BCM pins from the config
#   --python PY   interpreter with edge-plm installed (default /opt/edge-plm/bin/python)
#   --force       run even while the edge-plm service is active (it owns the pins)
#
# Uses gpiozero through edge-plm's own pin factory selection; the relay ends in its configured
# safe state. Run as the service user to test its access:
#   sudo -u edge-plm firmware_scripts/gpio-test.sh
set -euo pipefail

N=3
INTERVAL=1
WATCH=10
CONFIG=""
RELAY=""
SWITCH=""
PYTHON=""
FORCE=0
while [ $# -gt 0 ]; do
    case "$1" in
        -n) N="${2:?-n needs a number}"; shift 2 ;;
        --interval) INTERVAL="${2:?--interval needs seconds}"; shift 2 ;;
        --watch) WATCH="${2:?--watch needs seconds}"; shift 2 ;;
        --config) CONFIG="${2:?--config needs a file}"; shift 2 ;;
        --relay) RELAY="${2:?--relay needs a pin}"; shift 2 ;;
        --switch) SWITCH="${2:?--switch needs a pin}"; shift 2 ;;
        --python) PYTHON="${2:?--python needs a path}"; shift 2 ;;
        --force) FORCE=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpio-test.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ -z "$PYTHON" ]; then
    if [ -x /opt/edge-plm/bin/python ]; then PYTHON=/opt/edge-plm/bin/python; else PYTHON=python3; fi
fi
if [ "$FORCE" = 0 ] && command -v systemctl >/dev/null 2>&1 \
    && systemctl is-active --quiet edge-plm.service 2>/dev/null; then
    echo "gpio-test.sh: the edge-plm service is running and owns the pins:" \
         "sudo systemctl stop edge-plm first (or --force)" >&2
    exit 1
fi

cd /  # import the installed edge_plm, not a checkout in the current directory
exec "$PYTHON" - "$N" "$INTERVAL" "$WATCH" "$CONFIG" "$RELAY" "$SWITCH" <<'PY'
import sys, threading, time

from gpiozero import Button, DigitalOutputDevice

from edge_plm.device.pins import PinFactoryError, make_pin_factory
from edge_plm.config.settings import ConfigError, load

n, interval, watch = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
config, relay_pin, switch_pin = sys.argv[4] or None, sys.argv[5], sys.argv[6]
try:
    g = load(config).gpio
except ConfigError as exc:
    sys.exit(f"config: {exc}")
relay_pin = int(relay_pin) if relay_pin else g.relay_pin
switch_pin = int(switch_pin) if switch_pin else g.switch_pin
try:
    factory, description = make_pin_factory(g.pin_factory)
except PinFactoryError as exc:
    sys.exit(f"GPIO: {exc}")
print(f"pin factory: {description}")
if description.startswith("mock"):
    print("WARNING: simulated pins: nothing will click (see `edge-plm doctor`)")
relay = DigitalOutputDevice(relay_pin, active_high=g.relay_active_high,
                            initial_value=g.relay_safe_state, pin_factory=factory)
button = Button(switch_pin, pull_up=g.switch_pull_up, bounce_time=g.switch_bounce_ms / 1000,
                pin_factory=factory)
presses, lock = [], threading.Lock()

def on_change(state):
    with lock:
        presses.append((time.monotonic(), state))
    print(f"  switch {switch_pin}: {state}")

button.when_pressed = lambda: on_change("pressed/closed")
button.when_released = lambda: on_change("released/open")
polarity = "active-high" if g.relay_active_high else "active-low"
try:
    print(f"relay on BCM {relay_pin} ({polarity}), {n} click(s), {interval:g} s apart")
    for i in range(n):
        relay.on(); print(f"  click {i + 1}: ON"); time.sleep(interval)
        relay.off(); print(f"  click {i + 1}: OFF"); time.sleep(interval)
    print(f"switch on BCM {switch_pin} (pull-{'up' if g.switch_pull_up else 'down'}, "
          f"{g.switch_mode}): flip or press it now, watching {watch:g} s "
          f"(currently {'closed' if button.is_pressed else 'open'})")
    time.sleep(watch)
finally:
    relay.value = g.relay_safe_state
    relay.close(); button.close(); factory.close()
with lock:
    pressed = sum(1 for _, s in presses if s.startswith("pressed"))
print(f"result: {n} relay click(s); switch: {pressed} press(es)/closing(s), {len(presses)} change(s) seen")
if not presses:
    print("no switch changes: check the wiring (switch between the pin and GND with pull-up) "
          "and gpio.switch_pin")
PY
