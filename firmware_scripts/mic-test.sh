#!/usr/bin/env bash
# Microphone check: list the capture devices, record a few seconds, print the level in dBFS.
#
# Usage: firmware_scripts/mic-test.sh [-d DEVICE] [-s SECONDS] [-o FILE.wav] [--python PY]
#   -d DEVICE    arecord device (e.g. plughw:1,0) or, without arecord, a sounddevice index/name
#                (default: the system default input)
#   -s SECONDS   recording length (default 3)
#   -o FILE      keep the recording (16 kHz mono 16-bit WAV); default: a temporary file
#   --python PY  interpreter with edge-plm's dependencies (default /opt/edge-plm/bin/python)
#
# Records with arecord (alsa-utils) when present, else with python sounddevice. Run it as the
# service user to test its access: sudo -u edge-plm firmware_scripts/mic-test.sh
# (speak during the recording; the service counts a block as speech above
# audio.energy_threshold_db, -40 dBFS by default).
set -euo pipefail

DEVICE=""
SECONDS_=3
OUT=""
PYTHON=""
while [ $# -gt 0 ]; do
    case "$1" in
        -d) DEVICE="${2:?-d needs a device}"; shift 2 ;;
        -s) SECONDS_="${2:?-s needs seconds}"; shift 2 ;;
        -o) OUT="${2:?-o needs a file}"; shift 2 ;;
        --python) PYTHON="${2:?--python needs a path}"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "mic-test.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ "$SECONDS_" =~ ^[0-9]+$ ]] && [ "$SECONDS_" -ge 1 ] || { echo "mic-test.sh: -s needs a whole number >= 1" >&2; exit 2; }
if [ -z "$PYTHON" ]; then
    if [ -x /opt/edge-plm/bin/python ]; then PYTHON=/opt/edge-plm/bin/python; else PYTHON=python3; fi
fi
CLEANUP=""
if [ -z "$OUT" ]; then
    OUT="$(mktemp --suffix=.wav)"
    CLEANUP="$OUT"
fi
trap '[ -z "$CLEANUP" ] || rm -f "$CLEANUP"' EXIT

echo "== capture devices"
if command -v arecord >/dev/null 2>&1; then
    arecord -l 2>&1 || true
else
    echo "(no arecord: sudo apt-get install alsa-utils)"
fi
"$PYTHON" - <<'PY' || echo "(python sounddevice unavailable: sudo apt-get install libportaudio2)"
import sounddevice as sd
devices = sd.query_devices()
inputs = [(i, d) for i, d in enumerate(devices) if d["max_input_channels"] > 0]
print(f"PortAudio input devices ({len(inputs)}):")
for i, d in inputs:
    print(f"  {i}: {d['name']}  ({d['max_input_channels']} ch, default {d['default_samplerate']:.0f} Hz)")
PY

echo "== recording ${SECONDS_} s: speak now"
if command -v arecord >/dev/null 2>&1; then
    args=(-q -f S16_LE -r 16000 -c 1 -d "$SECONDS_")
    [ -z "$DEVICE" ] || args+=(-D "$DEVICE")
    arecord "${args[@]}" "$OUT"
else
    "$PYTHON" - "$OUT" "$SECONDS_" "$DEVICE" <<'PY'
import sys, wave
import sounddevice as sd
out, seconds, device = sys.argv[1], int(sys.argv[2]), sys.argv[3] or None
if device is not None and device.isdigit():
    device = int(device)
try:
    data = sd.rec(int(seconds * 16000), samplerate=16000, channels=1, dtype="int16", device=device)
    sd.wait()
except Exception as exc:  # PortAudioError: no such device, no input device, device busy
    sys.exit(f"recording failed: {exc} (no input device? see the list above and `arecord -l`)")
with wave.open(out, "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000); w.writeframes(data.tobytes())
PY
fi

echo "== level"
"$PYTHON" - "$OUT" <<'PY'
import array, math, sys, wave
with wave.open(sys.argv[1], "rb") as w:
    if w.getsampwidth() != 2:
        sys.exit(f"unexpected sample width {w.getsampwidth()}")
    rate, channels, frames = w.getframerate(), w.getnchannels(), w.readframes(w.getnframes())
x = array.array("h", frames)
if sys.byteorder == "big":
    x.byteswap()
if not x:
    sys.exit("no samples recorded")
def db(v):
    return 20 * math.log10(max(v, 1e-9) / 32768.0)
rms = math.sqrt(sum(s * s for s in x) / len(x))
peak = max(abs(s) for s in x)
print(f"{len(x) / channels / rate:.1f} s at {rate} Hz, {channels} ch: RMS {db(rms):.1f} dBFS, peak {db(peak):.1f} dBFS")
if peak == 0:
    print("verdict: digital silence: wrong device, muted capture (alsamixer), or no access (audio group)")
elif db(rms) < -60:
    print("verdict: very quiet: raise the capture gain (alsamixer, F4) or move closer")
elif peak >= 32767:
    print("verdict: clipping: lower the capture gain")
else:
    print("verdict: ok (speech should be well above -40 dBFS, the default audio.energy_threshold_db)")
PY
if [ -z "$CLEANUP" ]; then echo "kept $OUT"; fi
