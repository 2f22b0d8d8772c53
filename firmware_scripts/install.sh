#!/usr/bin/env bash
# Install edge-plm on a Raspberry Pi (Raspberry Pi OS bookworm) or a Libre "Le Potato"
# (Debian/Armbian bookworm) and run it as a hardened systemd service.
#
# Usage: sudo firmware_scripts/install.sh [options]
#
#   --from PATH            install edge-plm from this checkout directory or wheel
#                          (default: the checkout this script is in)
#   --vosk-model ZIP       also install this Vosk model archive ...
#   --vosk-sha256 HEX      ... after verifying its SHA-256 (required with --vosk-model)
#   --python PY            interpreter for the venv (default: /usr/bin/python3, >= 3.11)
#   --isolated             venv without the distro's Python packages (default: with them,
#                          so Raspberry Pi OS's python3-lgpio / python3-rpi.gpio are usable)
#   --no-deps              pip installs edge-plm only: no dependencies, no index, no build
#                          isolation; the venv gets no pip of its own and uses the
#                          interpreter's pip, setuptools and packages (CI, offline, tests)
#   --skip-apt             do not install Debian packages
#   --no-warm              skip the Numba cache warm-up
#   --no-start             install and enable the unit, but do not (re)start the service
#   --dry-run              print every step, change nothing
#   --uninstall            remove the unit, udev rule, venv and the user; keep the data
#                          (/var/lib/edge-plm) and the config (/etc/edge-plm) ...
#   --purge                ... unless --purge is given too
#   --prefix DIR           install into DIR as a throwaway root (tests, image staging): every
#                          path below lives under DIR; skipped: apt, groupadd/useradd/userdel,
#                          chown to the service user (files belong to whoever runs the script),
#                          udevadm, systemctl; the warm-up and doctor run as the current user
#   -h, --help             this text
#
# Needs a 64-bit system (arm64 or x86_64): on a 32-bit userland (armv7l / armhf) it stops at once.
#
# Idempotent: every step first checks whether it is already done; a second run changes
# nothing and says so. What it does, in order:
#   1. Debian packages (libportaudio2, python3-venv, python3-dev, alsa-utils, gpiod, espeak-ng, ...)
#   2. the gpio group (created if missing, e.g. Armbian) and a udev rule giving it /dev/gpiochip*
#   3. the system user edge-plm in the gpio and audio groups
#   4. directories: /etc/edge-plm (0755), /var/lib/edge-plm and its numba-cache, models (0700)
#   5. the venv /opt/edge-plm with edge-plm (and a GPIO library, lgpio, when none is importable;
#      paho-mqtt when the config has [mqtt] enabled = true);
#      mic-test.sh and gpio-test.sh are copied to /opt/edge-plm/share/edge-plm/
#   6. /etc/edge-plm/config.toml: every key with its default, commented (never overwritten)
#   7. optional: the Vosk model (`edge-plm asr install ZIP --sha256 HEX`, as the service user)
#   8. Numba cache warm-up as the service user (first start without compiling)
#   9. /etc/systemd/system/edge-plm.service, then `systemctl enable --now` (skipped with a
#      message when systemd is not PID 1: chroot, container)
#  10. `edge-plm doctor` as the service user (report only; the install does not fail on it)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
SERVICE_USER="edge-plm"
UNIT_NAME="edge-plm.service"
APT_PACKAGES=(libportaudio2 python3-venv python3-dev python3-pip alsa-utils gpiod util-linux ca-certificates
              espeak-ng)  # espeak-ng: talk-back's speech ([talkback], off by default)
APT_OPTIONAL=(python3-lgpio)  # Raspberry Pi OS only; installed when the archive has it

PREFIX=""
SOURCE=""
VOSK_ZIP=""
VOSK_SHA=""
PYTHON=""
SYSTEM_SITE=1
NO_DEPS=0
SKIP_APT=0
NO_WARM=0
NO_START=0
DRY_RUN=0
UNINSTALL=0
PURGE=0

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 1; }
need_arg() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --from) need_arg "$@"; SOURCE="$2"; shift 2 ;;
        --vosk-model) need_arg "$@"; VOSK_ZIP="$2"; shift 2 ;;
        --vosk-sha256) need_arg "$@"; VOSK_SHA="$2"; shift 2 ;;
        --python) need_arg "$@"; PYTHON="$2"; shift 2 ;;
        --prefix) need_arg "$@"; PREFIX="$2"; shift 2 ;;
        --isolated) SYSTEM_SITE=0; shift ;;
        --system-site-packages) SYSTEM_SITE=1; shift ;;
        --no-deps) NO_DEPS=1; shift ;;
        --skip-apt) SKIP_APT=1; shift ;;
        --no-warm) NO_WARM=1; shift ;;
        --no-start) NO_START=1; shift ;;
        --dry-run) DRY_RUN=1; shift ;;
        --uninstall) UNINSTALL=1; shift ;;
        --purge) PURGE=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done

# --- paths ------------------------------------------------------------------------------------
if [ -n "$PREFIX" ]; then
    case "$PREFIX" in
        /) die "--prefix / is the real system: leave --prefix out" ;;
        /*) PREFIX="${PREFIX%/}" ;;
        *) die "--prefix must be an absolute path, got $PREFIX" ;;
    esac
fi
VENV="$PREFIX/opt/edge-plm"
ETC_DIR="$PREFIX/etc/edge-plm"
CONFIG="$ETC_DIR/config.toml"
STATE_DIR="$PREFIX/var/lib/edge-plm"
NUMBA_CACHE="$STATE_DIR/numba-cache"
MODELS_DIR="$STATE_DIR/models"
UNIT_SRC="$REPO_DIR/deploy/$UNIT_NAME"
UNIT_DST="$PREFIX/etc/systemd/system/$UNIT_NAME"
UDEV_RULE="$PREFIX/etc/udev/rules.d/99-edge-plm-gpio.rules"
DOC_SRC="$REPO_DIR/docs/deploy.md"
DOC_DST="$VENV/share/doc/edge-plm/deploy.md"
PKG_STAMP="$VENV/.edge-plm-installed"
WARM_STAMP="$NUMBA_CACHE/.edge-plm-warmed"

# --- output and actions -----------------------------------------------------------------------
CHANGES=0
N_STEP=0
step() { N_STEP=$((N_STEP + 1)); printf '\n[%d] %s\n' "$N_STEP" "$*"; }
ok() { printf '    ok: %s\n' "$*"; }
skip() { printf '    skipped: %s\n' "$*"; }
warn() { printf '    WARNING: %s\n' "$*" >&2; }
change() {
    CHANGES=$((CHANGES + 1))
    if [ "$DRY_RUN" = 1 ]; then printf '    would: %s\n' "$*"; else printf '    doing: %s\n' "$*"; fi
}
# run CMD...: execute, or print it under --dry-run
run() {
    if [ "$DRY_RUN" = 1 ]; then
        printf '      $'; printf ' %q' "$@"; printf '\n'
    else
        "$@"
    fi
}
# put_file DST MODE < content: write DST atomically when its content differs
put_file() {
    local dst="$1" mode="$2" tmp
    tmp="$(mktemp)"
    cat >"$tmp"
    if [ -f "$dst" ] && cmp -s "$tmp" "$dst"; then
        rm -f "$tmp"
        ok "$dst is up to date"
        return 1
    fi
    change "write $dst (mode $mode)"
    if [ "$DRY_RUN" = 1 ]; then
        rm -f "$tmp"
    else
        mkdir -p "$(dirname "$dst")"
        install -m "$mode" "$tmp" "$dst.tmp.$$"
        mv -f "$dst.tmp.$$" "$dst"
        rm -f "$tmp"
    fi
    return 0
}

systemd_booted() { [ -d /run/systemd/system ]; }  # sd_booted(3): systemd is PID 1
pid1() { ps -p 1 -o comm= 2>/dev/null || cat /proc/1/comm 2>/dev/null || echo unknown; }
user_exists() { id -u "$SERVICE_USER" >/dev/null 2>&1; }

# as_user CMD...: run as the service user (the current user under --prefix), from / (so that
# `python -c` imports the installed package, not a checkout in the current directory)
as_user() {
    if [ -n "$PREFIX" ] || [ "$(id -un)" = "$SERVICE_USER" ]; then
        (cd / && run env NUMBA_CACHE_DIR="$NUMBA_CACHE" NUMBA_CPU_NAME=generic HOME="$STATE_DIR" "$@")
    else
        (cd / && run runuser -u "$SERVICE_USER" -- env NUMBA_CACHE_DIR="$NUMBA_CACHE" NUMBA_CPU_NAME=generic HOME="$STATE_DIR" "$@")
    fi
}

# ensure_dir DIR MODE OWNER(user|root)
ensure_dir() {
    local dir="$1" mode="$2" owner="$3" want_uid="" cur
    if [ -z "$PREFIX" ]; then
        if [ "$owner" = user ]; then
            want_uid="$(id -u "$SERVICE_USER" 2>/dev/null || echo "$SERVICE_USER")"
        else
            want_uid=0
        fi
    fi
    if [ ! -d "$dir" ]; then
        change "create $dir (mode $mode${want_uid:+, owner $owner})"
        run mkdir -p "$dir"
        run chmod "$mode" "$dir"
        [ -z "$want_uid" ] || [ "$owner" = root ] || run chown "$SERVICE_USER:$SERVICE_USER" "$dir"
        return
    fi
    cur="$(stat -c '%a' "$dir")"
    if [ "$cur" != "${mode#0}" ]; then
        change "chmod $mode $dir (was $cur)"
        run chmod "$mode" "$dir"
    fi
    if [ -n "$want_uid" ] && [ "$(stat -c '%u' "$dir")" != "$want_uid" ]; then
        if [ "$owner" = user ]; then
            change "chown -R $SERVICE_USER: $dir"
            run chown -R "$SERVICE_USER:$SERVICE_USER" "$dir"
        else
            change "chown root: $dir"
            run chown root:root "$dir"
        fi
    fi
    [ "$cur" != "${mode#0}" ] || ok "$dir exists (mode $mode)"
}

# fingerprint of what would be installed: the wheel's hash, or the checkout's package files
source_fingerprint() {
    if [ -f "$SOURCE" ]; then
        sha256sum "$SOURCE" | cut -d' ' -f1
    else
        (cd "$SOURCE" && find pyproject.toml edge_plm -type f \
            ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z \
            | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
    fi
}

# --- preflight --------------------------------------------------------------------------------
preflight() {
    step "preflight"
    if [ -z "$PREFIX" ] && [ "$(id -u)" != 0 ]; then
        if [ "$DRY_RUN" = 1 ]; then
            warn "not root: a real run needs sudo (dry run continues)"
        else
            die "run as root (sudo), or use --prefix DIR / --dry-run"
        fi
    fi
    if [ -r /etc/os-release ]; then
        # shellcheck disable=SC1091
        ok "system: $(. /etc/os-release && printf '%s' "${PRETTY_NAME:-$ID}"), $(uname -m)"
    fi
    if [ -r /proc/device-tree/model ]; then
        ok "board: $(tr -d '\0' </proc/device-tree/model)"
    fi
    if [ -n "$PREFIX" ]; then
        ok "throwaway root $PREFIX: apt, users/groups, chown, udevadm and systemctl are skipped"
    fi
    [ "$DRY_RUN" = 0 ] || ok "dry run: nothing will be changed"
    if systemd_booted; then ok "systemd is PID 1"; else ok "systemd is not PID 1 (PID 1: $(pid1))"; fi
}

check_install_args() {
    if [ -z "$SOURCE" ]; then SOURCE="$REPO_DIR"; fi
    [ -e "$SOURCE" ] || die "--from $SOURCE: no such file or directory"
    SOURCE="$(cd "$(dirname "$SOURCE")" && pwd)/$(basename "$SOURCE")"
    if [ -d "$SOURCE" ]; then
        [ -f "$SOURCE/pyproject.toml" ] || die "--from $SOURCE: not an edge-plm checkout (no pyproject.toml)"
    else
        case "$SOURCE" in *.whl) ;; *) die "--from $SOURCE: give a checkout directory or a .whl" ;; esac
    fi
    if [ -n "$VOSK_ZIP" ] || [ -n "$VOSK_SHA" ]; then
        [ -n "$VOSK_ZIP" ] && [ -n "$VOSK_SHA" ] || die "--vosk-model and --vosk-sha256 go together"
        [ -f "$VOSK_ZIP" ] || die "--vosk-model $VOSK_ZIP: no such file"
        [[ "$VOSK_SHA" =~ ^[0-9a-fA-F]{64}$ ]] || die "--vosk-sha256: need 64 hex characters"
        VOSK_ZIP="$(cd "$(dirname "$VOSK_ZIP")" && pwd)/$(basename "$VOSK_ZIP")"
    fi
    [ -f "$UNIT_SRC" ] || die "$UNIT_SRC is missing (run the script from an edge-plm checkout)"
    if [ -z "$PYTHON" ]; then
        if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
    fi
    command -v "$PYTHON" >/dev/null 2>&1 || die "no Python interpreter $PYTHON (apt-get install python3)"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || die "$PYTHON is Python $("$PYTHON" -c 'import platform; print(platform.python_version())'); edge-plm needs >= 3.11 (Raspberry Pi OS / Debian bookworm)"
    PYTHON="$("$PYTHON" -c 'import sys; print(sys.executable)')"  # not a wrapper (pyenv shim)
    if [ "$NO_DEPS" = 1 ]; then
        [ "$SYSTEM_SITE" = 1 ] || die "--no-deps needs the interpreter's packages: drop --isolated"
        "$PYTHON" -c 'import setuptools, wheel, pip' 2>/dev/null \
            || die "--no-deps: $PYTHON needs pip, setuptools and wheel importable"
    fi
}

# --- install steps ----------------------------------------------------------------------------
install_packages() {
    step "Debian packages"
    if [ -n "$PREFIX" ]; then skip "--prefix"; return; fi
    if [ "$SKIP_APT" = 1 ]; then skip "--skip-apt"; return; fi
    if ! command -v apt-get >/dev/null 2>&1; then
        warn "no apt-get: install these yourself: ${APT_PACKAGES[*]}"
        return
    fi
    local missing=() pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    for pkg in "${APT_OPTIONAL[@]}"; do
        if ! dpkg -s "$pkg" >/dev/null 2>&1 && apt-cache show "$pkg" >/dev/null 2>&1; then
            missing+=("$pkg")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        ok "installed: ${APT_PACKAGES[*]}"
        return
    fi
    change "apt-get install ${missing[*]}"
    run env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

install_gpio_access() {
    step "gpio group and udev rule for /dev/gpiochip*"
    if [ -n "$PREFIX" ]; then
        skip "groupadd (--prefix)"
    elif getent group gpio >/dev/null 2>&1; then
        ok "group gpio exists"
    else
        change "create the system group gpio (this distribution has none)"
        run groupadd --system gpio
    fi
    local rule_changed=0
    put_file "$UDEV_RULE" 0644 <<'EOF' && rule_changed=1
# Written by edge-plm firmware_scripts/install.sh: GPIO for members of the gpio group
# (Raspberry Pi OS ships an equivalent rule; Armbian/Debian on Le Potato does not).
SUBSYSTEM=="gpio", KERNEL=="gpiochip*", GROUP="gpio", MODE="0660"
KERNEL=="gpiomem*", GROUP="gpio", MODE="0660"
EOF
    if [ "$rule_changed" = 1 ]; then
        if [ -n "$PREFIX" ]; then
            skip "udevadm (--prefix)"
        elif command -v udevadm >/dev/null 2>&1 && systemd_booted; then
            run udevadm control --reload-rules
            run udevadm trigger --subsystem-match=gpio
        else
            skip "udevadm reload (udev not running): the rule applies at the next boot"
        fi
    fi
}

install_user() {
    step "service user $SERVICE_USER (groups gpio, audio)"
    if [ -n "$PREFIX" ]; then skip "useradd (--prefix): files belong to $(id -un)"; return; fi
    if user_exists; then
        local groups missing=() g
        groups=" $(id -nG "$SERVICE_USER") "
        for g in gpio audio; do
            [[ "$groups" == *" $g "* ]] || missing+=("$g")
        done
        if [ "${#missing[@]}" -eq 0 ]; then
            ok "user $SERVICE_USER exists, groups:$groups"
        else
            change "add $SERVICE_USER to ${missing[*]}"
            run usermod -a -G "$(IFS=,; echo "${missing[*]}")" "$SERVICE_USER"
        fi
        return
    fi
    change "create the system user $SERVICE_USER"
    run useradd --system --user-group --groups gpio,audio --home-dir /var/lib/edge-plm \
        --no-create-home --shell /usr/sbin/nologin --comment "edge-plm voice switch" "$SERVICE_USER"
}

install_dirs() {
    step "directories"
    ensure_dir "$ETC_DIR" 0755 root
    ensure_dir "$STATE_DIR" 0700 user
    ensure_dir "$NUMBA_CACHE" 0700 user
    ensure_dir "$MODELS_DIR" 0700 user
}

PKG_CHANGED=0
install_venv() {
    step "virtualenv $VENV with edge-plm from $SOURCE"
    local venv_args=() pip_args=(--disable-pip-version-check --no-input --quiet) want have site
    [ "$SYSTEM_SITE" = 0 ] || venv_args+=(--system-site-packages)
    # --no-deps: no pip/setuptools of the venv's own (the bundled setuptools would shadow the
    # interpreter's newer one); the interpreter's pip and build backend do the install
    [ "$NO_DEPS" = 0 ] || venv_args+=(--without-pip)
    site="$([ "$SYSTEM_SITE" = 1 ] && echo true || echo false)"
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1 \
        && grep -qi "^include-system-site-packages = $site" "$VENV/pyvenv.cfg" 2>/dev/null; then
        ok "venv exists ($("$VENV/bin/python" -c 'import platform; print(platform.python_version())'))"
    else
        if [ -e "$VENV" ]; then
            change "recreate the venv (missing python, or a different --isolated setting)"
            run rm -rf "$VENV"
        else
            change "create the venv ($PYTHON${venv_args[*]:+ ${venv_args[*]}})"
        fi
        run "$PYTHON" -m venv "${venv_args[@]}" "$VENV"
    fi
    [ "$NO_DEPS" = 0 ] || pip_args+=(--no-deps --no-index --no-build-isolation)
    want="source=$SOURCE"$'\n'"fingerprint=$(source_fingerprint)"$'\n'"pip=${pip_args[*]}"
    have="$(cat "$PKG_STAMP" 2>/dev/null || true)"
    if [ "$want" = "$have" ] && "$VENV/bin/python" -c 'import edge_plm' >/dev/null 2>&1; then
        ok "edge-plm $("$VENV/bin/python" -c 'import edge_plm; print(edge_plm.__version__)') is installed from this source"
    else
        PKG_CHANGED=1
        change "pip install edge-plm from $SOURCE${have:+ (the source changed since the last install)}"
        run "$VENV/bin/python" -m pip install "${pip_args[@]}" --upgrade --force-reinstall --no-deps "$SOURCE"
        if [ "$NO_DEPS" = 0 ]; then  # then its dependencies, kept when already satisfied
            run "$VENV/bin/python" -m pip install "${pip_args[@]}" "$SOURCE"
        fi
        if [ "$DRY_RUN" = 0 ]; then printf '%s\n' "$want" >"$PKG_STAMP"; fi
    fi
    if [ "$NO_DEPS" = 0 ]; then
        if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import lgpio' >/dev/null 2>&1; then
            ok "GPIO library lgpio is importable"
        else
            change "pip install lgpio (gpiozero's GPIO library; none is importable yet)"
            run "$VENV/bin/python" -m pip install "${pip_args[@]}" lgpio \
                || warn "lgpio could not be installed: GPIO stays mock only until a GPIO library is importable (see docs/deploy.md)"
        fi
    fi
    if mqtt_enabled; then  # the optional bridge ([mqtt] enabled = true) needs paho-mqtt
        if "$VENV/bin/python" -c 'import paho.mqtt.client' >/dev/null 2>&1; then
            ok "paho-mqtt is importable ([mqtt] is enabled in $CONFIG)"
        elif [ "$NO_DEPS" = 0 ]; then
            change "pip install paho-mqtt ([mqtt] is enabled in $CONFIG: the bridge needs it)"
            run "$VENV/bin/python" -m pip install "${pip_args[@]}" 'paho-mqtt>=2.0,<3' \
                || warn "paho-mqtt could not be installed: the device runs without the MQTT bridge (pip install 'edge-plm[mqtt]' into $VENV)"
        else
            warn "[mqtt] is enabled in $CONFIG but paho-mqtt is not installed (--no-deps): $VENV/bin/pip install 'paho-mqtt>=2.0,<3'"
        fi
    fi
    if [ -f "$DOC_SRC" ]; then
        put_file "$DOC_DST" 0644 <"$DOC_SRC" || true
    fi
    local helper  # the test helpers, where the service user can run them (a checkout in a
    for helper in mic-test.sh gpio-test.sh; do  # home directory is not readable to it)
        put_file "$VENV/share/edge-plm/$helper" 0755 <"$SCRIPT_DIR/$helper" || true
    done
}

# mqtt_enabled: the existing config turns the MQTT bridge on ([mqtt] enabled = true)
mqtt_enabled() {
    [ -f "$CONFIG" ] && [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c \
        'import sys; from edge_plm.config import settings; sys.exit(0 if settings.load(sys.argv[1]).mqtt.enabled else 1)' \
        "$CONFIG" >/dev/null 2>&1
}

install_config() {
    step "config $CONFIG"
    if [ -e "$CONFIG" ]; then
        ok "$CONFIG exists: kept as it is (never overwritten)"
        if [ -x "$VENV/bin/edge-plm" ]; then
            "$VENV/bin/edge-plm" config check --config "$CONFIG" >/dev/null 2>&1 \
                || warn "$CONFIG is not valid: $("$VENV/bin/edge-plm" config check --config "$CONFIG" 2>&1 | tail -n 1)"
        fi
        return
    fi
    change "write the commented defaults (paths.state_dir = $STATE_DIR)"
    run "$VENV/bin/edge-plm" config defaults --state-dir "$STATE_DIR" --output "$CONFIG" >/dev/null
    run chmod 0644 "$CONFIG"
}

install_vosk_model() {
    step "Vosk model"
    if [ -z "$VOSK_ZIP" ]; then
        skip "no --vosk-model (the embedded pocketsphinx English model is used; see docs/deploy.md)"
        return
    fi
    local name
    name="$("$PYTHON" - "$VOSK_ZIP" <<'EOF'
import sys, zipfile
from pathlib import Path, PurePosixPath
names = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.strip("/")]
tops = {PurePosixPath(n).parts[0] for n in names}
nested = all(len(PurePosixPath(n).parts) > 1 or n.endswith("/") for n in names)
print(next(iter(tops)) if len(tops) == 1 and nested else Path(sys.argv[1]).stem)
EOF
)" || die "--vosk-model $VOSK_ZIP is not a readable zip archive"
    if [ -d "$MODELS_DIR/$name" ]; then
        ok "model $name is already installed in $MODELS_DIR"
        return
    fi
    change "verify $VOSK_ZIP (SHA-256) and install model $name into $MODELS_DIR"
    as_user "$VENV/bin/edge-plm" asr install "$VOSK_ZIP" --sha256 "$VOSK_SHA" --models-dir "$MODELS_DIR"
}

install_warm_cache() {
    step "Numba cache warm-up ($NUMBA_CACHE)"
    if [ "$NO_WARM" = 1 ]; then skip "--no-warm"; return; fi
    local want
    want="$(cat "$PKG_STAMP" 2>/dev/null || echo none)"
    if [ "$PKG_CHANGED" = 0 ] && [ -f "$WARM_STAMP" ] && [ "$(cat "$WARM_STAMP")" = "$want" ]; then
        ok "kernels already compiled for this installation"
        return
    fi
    change "compile the model kernels as $([ -n "$PREFIX" ] && id -un || echo "$SERVICE_USER") (a tiny learn/predict; tens of seconds on a Pi)"
    as_user "$VENV/bin/python" -c 'from edge_plm.commands.doctor import warm_numba_cache as w; r = w(); print("    compiled", len(r["kernels"]), "kernels in", r["seconds"], "s")'
    if [ "$DRY_RUN" = 0 ]; then
        printf '%s\n' "$want" >"$WARM_STAMP"
        [ -n "$PREFIX" ] || chown "$SERVICE_USER:$SERVICE_USER" "$WARM_STAMP"
    fi
}

UNIT_CHANGED=0
install_unit() {
    step "systemd unit $UNIT_DST"
    if put_file "$UNIT_DST" 0644 <"$UNIT_SRC"; then UNIT_CHANGED=1; fi
    if [ -n "$PREFIX" ]; then skip "systemctl (--prefix)"; return; fi
    if ! command -v systemctl >/dev/null 2>&1; then
        skip "no systemctl on this system: start it yourself with /opt/edge-plm/bin/edge-plm run"
        return
    fi
    if ! systemd_booted; then
        skip "systemd is not PID 1 (PID 1 is $(pid1): a chroot or container?): not started." \
             "On the device: sudo systemctl enable --now $UNIT_NAME"
        if systemctl is-enabled --quiet "$UNIT_NAME" 2>/dev/null; then
            ok "$UNIT_NAME is enabled (starts at the next boot)"
        else
            change "enable $UNIT_NAME offline (symlink only; it starts at the next boot)"
            run systemctl enable "$UNIT_NAME" || warn "systemctl enable failed: enable it on the device"
        fi
        return
    fi
    [ "$UNIT_CHANGED" = 0 ] || run systemctl daemon-reload
    if [ "$NO_START" = 1 ]; then
        if systemctl is-enabled --quiet "$UNIT_NAME"; then ok "$UNIT_NAME is enabled"; else
            change "enable $UNIT_NAME (--no-start: not started)"
            run systemctl enable "$UNIT_NAME"
        fi
        return
    fi
    if ! systemctl is-enabled --quiet "$UNIT_NAME"; then
        change "systemctl enable --now $UNIT_NAME"
        run systemctl enable --now "$UNIT_NAME"
    elif ! systemctl is-active --quiet "$UNIT_NAME"; then
        change "start $UNIT_NAME"
        run systemctl start "$UNIT_NAME"
    elif [ "$UNIT_CHANGED" = 1 ] || [ "$PKG_CHANGED" = 1 ] || [ "$CONFIG_WRITTEN" = 1 ]; then
        change "restart $UNIT_NAME (new version, unit or config)"
        run systemctl restart "$UNIT_NAME"
    else
        ok "$UNIT_NAME is enabled and running"
    fi
}

run_doctor() {
    step "edge-plm doctor"
    if [ "$DRY_RUN" = 1 ]; then skip "dry run"; return; fi
    as_user "$VENV/bin/edge-plm" doctor --config "$CONFIG" | sed 's/^/    /' \
        || warn "doctor reports failures (above): the service may not work until they are fixed"
    if command -v aplay >/dev/null 2>&1 && aplay -l 2>/dev/null | grep -q '^card '; then
        ok "an audio output is present: spoken questions can be switched on with [talkback] enabled = true in $CONFIG (then run edge-plm doctor)"
    fi
}

# --- uninstall --------------------------------------------------------------------------------
uninstall() {
    step "stop and remove the unit"
    if [ -z "$PREFIX" ] && command -v systemctl >/dev/null 2>&1 && [ -e "$UNIT_DST" ]; then
        if systemd_booted; then
            if systemctl is-enabled --quiet "$UNIT_NAME" 2>/dev/null || systemctl is-active --quiet "$UNIT_NAME"; then
                change "systemctl disable --now $UNIT_NAME (the relay goes to its safe state)"
                run systemctl disable --now "$UNIT_NAME"
            fi
        elif systemctl is-enabled --quiet "$UNIT_NAME" 2>/dev/null; then
            change "systemctl disable $UNIT_NAME (offline)"
            run systemctl disable "$UNIT_NAME" || true
        fi
    fi
    if [ -e "$UNIT_DST" ]; then
        change "remove $UNIT_DST"
        run rm -f "$UNIT_DST"
        if [ -z "$PREFIX" ] && systemd_booted; then run systemctl daemon-reload; fi
    else
        ok "no unit installed"
    fi
    step "udev rule"
    if [ -e "$UDEV_RULE" ]; then
        change "remove $UDEV_RULE (the gpio group itself is kept: other software may use it)"
        run rm -f "$UDEV_RULE"
    else
        ok "no udev rule"
    fi
    step "venv $VENV"
    if [ -e "$VENV" ]; then
        change "remove $VENV"
        run rm -rf "$VENV"
    else
        ok "no venv"
    fi
    step "service user $SERVICE_USER"
    if [ -n "$PREFIX" ]; then
        skip "userdel (--prefix)"
    elif user_exists; then
        change "remove the user $SERVICE_USER"
        run userdel "$SERVICE_USER"
    else
        ok "no user $SERVICE_USER"
    fi
    step "data and config"
    if [ "$PURGE" = 1 ]; then
        local d
        for d in "$STATE_DIR" "$ETC_DIR"; do
            if [ -e "$d" ]; then change "remove $d (--purge)"; run rm -rf "$d"; else ok "no $d"; fi
        done
    else
        ok "kept $STATE_DIR (database, checkpoints, models) and $ETC_DIR; --purge removes them"
    fi
}

# require_64bit: stop at once on a 32-bit userland. A Raspberry Pi 4 with 32-bit Raspberry Pi OS
# reports the 64-bit kernel's aarch64 in `uname -m`, so dpkg's architecture decides too.
require_64bit() {
    local machine dpkg_arch=""
    machine="$(uname -m)"
    if command -v dpkg >/dev/null 2>&1; then
        dpkg_arch="$(dpkg --print-architecture 2>/dev/null || true)"
    fi
    case "$machine/$dpkg_arch" in
        armv*/* | arm/* | i?86/* | */armhf | */armel | */i386)
            die "32-bit system (uname -m: $machine${dpkg_arch:+, dpkg: $dpkg_arch}): 64-bit Raspberry Pi OS or Armbian/Debian arm64 is required (numpy, numba/llvmlite, scipy, pocketsphinx and cffi publish no 32-bit ARM wheels; see docs/deploy.md)" ;;
    esac
}

# --- main -------------------------------------------------------------------------------------
CONFIG_WRITTEN=0
[ "$UNINSTALL" = 1 ] || require_64bit
preflight
if [ "$UNINSTALL" = 1 ]; then
    uninstall
else
    [ "$PURGE" = 0 ] || die "--purge only goes with --uninstall"
    check_install_args
    if [ -n "$PREFIX" ] && [ "$DRY_RUN" = 0 ]; then mkdir -p "$PREFIX"; fi
    install_packages
    install_gpio_access
    install_user
    install_dirs
    install_venv
    [ -e "$CONFIG" ] || CONFIG_WRITTEN=1
    install_config
    install_vosk_model
    install_warm_cache
    install_unit
    run_doctor
fi

echo
if [ "$DRY_RUN" = 1 ]; then
    echo "dry run: $CHANGES change(s) would be made; nothing was changed"
elif [ "$CHANGES" = 0 ]; then
    echo "nothing changed: edge-plm is already $([ "$UNINSTALL" = 1 ] && echo uninstalled || echo "installed and up to date")"
else
    echo "done: $CHANGES change(s) made"
fi
