#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Fetches the benchmark peers' Debian packages for an ARM target and unpacks them into a private
# sysroot, which the cross toolchain files (cmake/toolchains/) then search:
#
#   bench/fetch-cross-peers.sh armv7|armv8 [sysroot]
#
# The sysroot defaults to .cross-peers/<triple>/ in the source tree (git-ignored). No root needed,
# and the host's package state is not touched: apt reads the target architecture's index into a
# folder of its own and only downloads; nothing is installed with dpkg. (The multiarch route,
# `dpkg --add-architecture armhf`, makes the host's own `apt-get update` depend on every foreign
# index of every suite, and a Multi-Arch: same library then has to be at the same version for
# both architectures, or nothing installs.)
#
# Packages come from Debian 12 (bookworm) main. Google Benchmark, Boost (Asio, Lockfree, Thread)
# and TBB are the target's build; moodycamel::ConcurrentQueue is an architecture-independent
# package; atomic_queue is header-only but packaged for amd64 alone, so its headers are taken
# from the build machine's architecture. A package that cannot be fetched is reported and left
# out: CMake then skips that peer with a message, as on x86-64.
#
# Environment: ASYNC_DEBIAN_MIRROR (default http://deb.debian.org/debian), ASYNC_DEBIAN_SUITE
# (default bookworm).
set -euo pipefail

usage() {
  echo "usage: $0 armv7|armv8 [sysroot]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
case "$1" in
  armv7) arch=armhf triple=arm-linux-gnueabihf ;;
  armv8) arch=arm64 triple=aarch64-linux-gnu ;;
  *) usage ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
root=${2:-$here/.cross-peers/$triple}
mirror=${ASYNC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${ASYNC_DEBIAN_SUITE:-bookworm}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

# The target's packages: development files and the shared libraries they link to.
target_pkgs=(
  libbenchmark-dev libbenchmark1debian
  libboost1.74-dev libboost-thread1.74-dev libboost-thread1.74.0
  libboost-atomic1.74-dev libboost-atomic1.74.0
  libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5
  libconcurrentqueue-dev
)
# Header-only peers packaged for some architectures only: the build machine's package.
host_pkgs=(libatomic-queue-dev)

command -v apt-get >/dev/null || { echo "$0: needs apt-get (Debian or Ubuntu)" >&2; exit 1; }
[ -r "$keyring" ] || { echo "$0: $keyring missing (apt-get install debian-archive-keyring)" >&2; exit 1; }

mkdir -p "$root"
root=$(cd "$root" && pwd)
work=$root/.apt
rm -rf "$work"
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/empty"
: >"$work/status"

apt_for() { # apt_for <arch> <apt-get arguments...>: apt-get with a private state for <arch>
  local a=$1
  shift
  printf 'deb [arch=%s signed-by=%s] %s %s main\n' "$a" "$keyring" "$mirror" "$suite" \
    >"$work/sources-$a.list"
  apt-get -q \
    -o Dir::State="$work" -o Dir::State::Lists="$work/lists-$a" -o Dir::State::status="$work/status" \
    -o Dir::Cache="$work/cache" -o Dir::Etc::SourceList="$work/sources-$a.list" \
    -o Dir::Etc::SourceParts="$work/empty" -o Dir::Etc::Preferences="$work/empty/none" \
    -o Dir::Etc::PreferencesParts="$work/empty" -o APT::Architecture="$a" \
    -o APT::Architectures::="$a" -o APT::Sandbox::User="$(id -un)" \
    -o Acquire::Retries=3 "$@"
}

fetch() { # fetch <arch> <packages...>: download each, report the ones that fail
  local a=$1 p
  shift
  mkdir -p "$work/lists-$a/partial"
  if ! apt_for "$a" update >"$work/update-$a.log" 2>&1 || grep -q '^E:' "$work/update-$a.log"; then
    echo "fetch-cross-peers: the $suite $a index could not be read from $mirror:" >&2
    cat "$work/update-$a.log" >&2
    return 1
  fi
  for p in "$@"; do
    if (cd "$work/debs" && apt_for "$a" download "$p" >>"$work/download.log" 2>&1); then
      echo "fetch-cross-peers: $p ($a)"
    else
      echo "fetch-cross-peers: $p ($a) could not be fetched: that peer will be skipped" >&2
    fi
  done
}

host_arch=$(dpkg --print-architecture)
fetch "$arch" "${target_pkgs[@]}"
fetch "$host_arch" "${host_pkgs[@]}" || true

for deb in "$work"/debs/*.deb; do
  [ -e "$deb" ] || continue
  case "$deb" in
    *_"$host_arch".deb)
      # Only the headers of a build-machine package: its libraries are not for the target.
      tmp=$(mktemp -d)
      dpkg-deb -x "$deb" "$tmp"
      if [ -d "$tmp/usr/include" ]; then
        mkdir -p "$root/usr/include"
        cp -a "$tmp/usr/include/." "$root/usr/include/"
      fi
      rm -rf "$tmp"
      ;;
    *) dpkg-deb -x "$deb" "$root" ;;
  esac
done
rm -rf "$work/cache" "$work/lists-"*
echo "fetch-cross-peers: $triple peers unpacked in $root"
