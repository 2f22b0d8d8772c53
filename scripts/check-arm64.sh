#!/usr/bin/env bash
# Reproduce the arm64 check under emulation: a Debian bookworm arm64 root file system
# (debootstrap), run by qemu-user-static through binfmt_misc, and inside it the README's first
# command (fresh venv, `pip install .` from PyPI, `edge-plm demo`).
#
# Usage: sudo scripts/check-arm64.sh [--dir DIR] [--mirror URL] [--ca-file FILE] [--clean]
#
#   --dir DIR      where the arm64 root lives (default: /var/tmp/edge-plm-arm64); an existing
#                  root from an earlier run is reused (debootstrap is skipped)
#   --mirror URL   Debian mirror (default: http://deb.debian.org/debian)
#   --ca-file FILE certificate bundle pip uses inside the root (e.g. the host's
#                  /etc/ssl/certs/ca-certificates.crt behind a TLS-inspecting proxy)
#   --clean        remove DIR at the end (default: keep it for the next run)
#   -h, --help     this text
#
# Needs root, network access to the Debian mirror and PyPI, and the host packages
# qemu-user-static, binfmt-support and debootstrap. Not part of CI: it takes tens of minutes.
# Each step prints its wall time; the last lines say PASS or FAIL. Exit code 0 only on PASS.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
ROOT=/var/tmp/edge-plm-arm64
MIRROR=http://deb.debian.org/debian
CLEAN=0
CA_FILE=""
# the README's first command, run as is inside the root (checked against README.md below)
FIRST_COMMAND='python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/edge-plm demo'

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() { printf 'check-arm64.sh: error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --dir) [ $# -ge 2 ] || die "--dir needs a value"; ROOT="$2"; shift 2 ;;
        --mirror) [ $# -ge 2 ] || die "--mirror needs a value"; MIRROR="$2"; shift 2 ;;
        --ca-file) [ $# -ge 2 ] || die "--ca-file needs a value"; CA_FILE="$2"; shift 2 ;;
        --clean) CLEAN=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
[ -z "$CA_FILE" ] || [ -r "$CA_FILE" ] || die "--ca-file $CA_FILE: not a readable file"
case "$ROOT" in /?*) ROOT="${ROOT%/}" ;; *) die "--dir must be an absolute path other than /" ;; esac

T_START=$SECONDS
T_STEP=$SECONDS
step() {
    printf '[%s] %s (previous step %d s)\n' "$(date -u +%H:%M:%S)" "$*" "$((SECONDS - T_STEP))"
    T_STEP=$SECONDS
}

MOUNTS=()
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
    local i
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        umount -l "${MOUNTS[$i]}" 2>/dev/null || printf 'check-arm64.sh: could not unmount %s\n' "${MOUNTS[$i]}" >&2
    done
    if [ "$CLEAN" = 1 ]; then rm -rf --one-file-system "$ROOT"; fi
}
trap cleanup EXIT

step "preflight"
[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot and binfmt_misc need it)"
for tool in debootstrap qemu-aarch64-static update-binfmts chroot git; do
    command -v "$tool" >/dev/null 2>&1 \
        || die "$tool not found: apt-get install qemu-user-static binfmt-support debootstrap git"
done
grep -qF "$FIRST_COMMAND" "$REPO_DIR/README.md" \
    || die "README.md no longer contains the first command this script runs: $FIRST_COMMAND"
if grep -qF " $ROOT/" /proc/mounts; then
    die "something is still mounted under $ROOT (an earlier run was killed?): umount it first"
fi
printf '    host: %s, %s\n' "$(uname -m)" "$(qemu-aarch64-static --version | head -n1)"

step "binfmt_misc: qemu-aarch64"
if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
        || die "cannot mount binfmt_misc (a container without that permission cannot run this check)"
fi
update-binfmts --enable qemu-aarch64 || die "update-binfmts --enable qemu-aarch64 failed"
entry=/proc/sys/fs/binfmt_misc/qemu-aarch64
if ! { [ -r "$entry" ] && grep -q '^enabled' "$entry"; }; then
    die "qemu-aarch64 is not registered in binfmt_misc"
fi
grep -q '^flags:.*F' "$entry" \
    || die "qemu-aarch64 is registered without the F flag: it cannot run inside a chroot"
printf '    %s\n' "$(tr '\n' ' ' <"$entry")"

if [ -f "$ROOT/.edge-plm-debootstrap-done" ]; then
    step "debootstrap: reusing $ROOT"
else
    step "debootstrap bookworm arm64 into $ROOT (minbase + python3, python3-venv, ca-certificates)"
    rm -rf --one-file-system "$ROOT"
    mkdir -p "$ROOT"
    debootstrap --arch=arm64 --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$ROOT" "$MIRROR"
    touch "$ROOT/.edge-plm-debootstrap-done"
fi
printf '    inside: uname -m = %s, dpkg = %s, %s\n' "$(chroot "$ROOT" uname -m)" \
    "$(chroot "$ROOT" dpkg --print-architecture)" "$(chroot "$ROOT" python3 --version)"

step "copy the checkout (git ls-files, with uncommitted changes) to /root/edge-plm"
rm -rf "$ROOT/root/edge-plm"
mkdir -p "$ROOT/root/edge-plm"
(cd "$REPO_DIR" && git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done \
    | tar --null -T - -cf -) \
    | tar -xf - -C "$ROOT/root/edge-plm"

for m in proc sys dev; do
    mount --bind "/$m" "$ROOT/$m"
    MOUNTS+=("$ROOT/$m")
done
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
CA_ENV=()
if [ -n "$CA_FILE" ]; then
    cp -L "$CA_FILE" "$ROOT/etc/ssl/certs/check-arm64-ca.crt"
    CA_ENV=(PIP_CERT=/etc/ssl/certs/check-arm64-ca.crt SSL_CERT_FILE=/etc/ssl/certs/check-arm64-ca.crt)
fi

step "inside the arm64 root: $FIRST_COMMAND"
set +e
chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 "${CA_ENV[@]}" \
    /bin/bash -c "cd /root/edge-plm && $FIRST_COMMAND" 2>&1 | tee "$ROOT/root/first-command.log"
rc=${PIPESTATUS[0]}
set -e

step "distributions installed in the arm64 venv: aarch64 wheels, pure-Python ones"
find "$ROOT/root/edge-plm/.venv/lib" -path '*dist-info/WHEEL' 2>/dev/null | sort \
    | while IFS= read -r wheel; do
        name="$(basename "$(dirname "$wheel")" .dist-info)"
        if grep -q '^Tag:.*aarch64' "$wheel"; then printf '    aarch64 %s\n' "$name"; fi
    done
printf '    pure Python (any): %s\n' "$(find "$ROOT/root/edge-plm/.venv/lib" -path '*dist-info/WHEEL' \
    -exec grep -L '^Tag:.*aarch64' {} + 2>/dev/null | wc -l)"

total=$((SECONDS - T_START))
if [ "$rc" = 0 ]; then
    printf 'PASS: the README first command ran inside Debian bookworm arm64 (qemu) in %d s total; log %s\n' \
        "$total" "$ROOT/root/first-command.log"
    exit 0
fi
printf 'FAIL: the README first command exited %d inside Debian bookworm arm64 (qemu), %d s total; log %s\n' \
    "$rc" "$total" "$ROOT/root/first-command.log"
exit 1
