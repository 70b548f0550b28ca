#!/usr/bin/env bash
# Try README's two commands, exactly as README.md writes them, on a fresh Debian 12 root, as a new user would.
#
#   sudo scripts/fresh-debian-check.sh [REPO]      (REPO: a git repository or URL; default: this checkout)
#
# Makes a Debian 12 (bookworm) root with debootstrap (minbase, plus sudo and ca-certificates, as a fresh machine
# has them), its top directory 0755 as on a real machine (tests that drop privileges must reach their files),
# clones REPO into it and runs each command README.md lists under "## Two commands" in its own fresh copy of
# that root (FRESH_ONE_ROOT=1: both in one root, one after the other). The commands are read from README.md,
# never copied here. Needs root (debootstrap, chroot, mount); about 15 minutes a command on 2 cores.
# The base root is cached as a tarball (FRESH_CACHE, default /tmp/dpsim-fresh-bookworm.tar). Exit 0 when every
# command passed, 1 when one failed, 2 on a usage or setup error.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
repo=${1:-$here}
cache=${FRESH_CACHE:-/tmp/dpsim-fresh-bookworm.tar}

die() { echo "fresh-debian-check: $*" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot, mount): run it with sudo"

# README's commands: the indented lines of the "## Two commands" section, in order.
readme_commands() {
  awk '/^## /{in_sec = ($0 ~ /^## Two commands/); next} in_sec && /^    [^ ]/{sub(/^    /, ""); print}' "$1"
}

mirror_of() {
  local src=/etc/apt/sources.list.d/debian.sources
  if [[ -f $src ]]; then awk '/^URIs:/{print $2; exit}' "$src"; else echo http://deb.debian.org/debian; fi
}

make_base() {
  [[ -f $cache ]] && return
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
  local base; base=$(mktemp -d)
  echo "== debootstrap bookworm (minbase) into $base"
  debootstrap --variant=minbase bookworm "$base" "$(mirror_of)" >"$base.log" 2>&1 || die "debootstrap failed: $base.log"
  if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    cp /etc/apt/sources.list.d/debian.sources "$base/etc/apt/sources.list.d/" && rm -f "$base/etc/apt/sources.list"
  fi
  chmod 755 "$base"  # mktemp -d made it 0700; the archive's "." keeps the mode of a real /
  tar -C "$base" -cf "$cache.tmp" . && mv "$cache.tmp" "$cache" && rm -rf "$base"
}

# fresh_root runs in a subshell ($(...)): it records its mounts in a file that the exit trap reads.
mounts=$(mktemp)
cleanup() { local m; while read -r m; do umount "$m" 2>/dev/null || true; done <"$mounts"; rm -f "$mounts"; }
trap cleanup EXIT

# A fresh root: the cached base, apt lists fetched, sudo present (minbase lacks it), the repository cloned.
fresh_root() {
  local root; root=$(mktemp -d /tmp/dpsim-fresh.XXXXXX)
  tar -C "$root" -xf "$cache"
  chmod 755 "$root"  # after tar: it restores the mode of the archive's "." (mktemp's 0700)
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  git clone -q "$repo" "$root/project"
  mount -t proc proc "$root/proc"; echo "$root/proc" >>"$mounts"
  mount --bind /dev "$root/dev"; echo "$root/dev" >>"$mounts"
  chroot "$root" /bin/bash -c "apt-get update -qq && apt-get install -y -qq sudo ca-certificates >/dev/null" >&2
  echo "$root"
}

run_in() {
  local root=$1 cmd=$2 start=$SECONDS
  echo "== [$root] $cmd"
  if chroot "$root" /bin/bash -lc "cd /project && $cmd"; then
    echo "== passed in $((SECONDS - start)) s: $cmd"
  else
    echo "== FAILED after $((SECONDS - start)) s: $cmd"; return 1
  fi
}

make_base
root=$(fresh_root)
# The commands as the cloned README.md writes them (what a new user reads), not this checkout's copy.
mapfile -t commands < <(readme_commands "$root/project/README.md")
((${#commands[@]} == 2)) || die "README.md's '## Two commands' section should list 2 commands, found ${#commands[@]}"
rc=0 first=1
for cmd in "${commands[@]}"; do
  if ((first == 0)) && [[ ${FRESH_ONE_ROOT:-0} != 1 ]]; then root=$(fresh_root); fi
  first=0
  run_in "$root" "$cmd" || { rc=1; break; }
done
echo "== fresh-debian-check: $([[ $rc -eq 0 ]] && echo passed || echo FAILED) in $SECONDS s (roots under /tmp/dpsim-fresh.*)"
exit $rc
