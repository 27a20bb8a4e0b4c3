#!/usr/bin/env bash
# Installs everything ksweep needs on a Debian 12 machine and, when no Kokkos with the
# OpenMP backend is installed, builds Kokkos (Serial + OpenMP) and installs the Kokkos
# Kernels headers from Debian's trilinos source package into a local prefix.
#
#   scripts/setup.sh            # idempotent; prints the prefix to pass as CMAKE_PREFIX_PATH
#
# Environment:
#   KSWEEP_DEPS   where the locally built Kokkos goes (default: <repo>/.deps when a build is
#                 already there, else ${XDG_CACHE_HOME:-~/.cache}/ksweep/deps, shared by every
#                 checkout on the machine, so a fresh clone does not build Kokkos again)
#   KSWEEP_SKIP_APT=1           do not call apt-get (packages already present)
#   KSWEEP_SETUP_PROFILE=program  only what the program and its figures need (scripts/demo.sh):
#                 no test, benchmark, Python-binding or formatting packages
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -n "${KSWEEP_DEPS:-}" ]; then
  deps=$KSWEEP_DEPS
elif [ -f "$repo/.deps/install/include/KokkosCore_config.h" ]; then
  deps=$repo/.deps
else
  deps=${XDG_CACHE_HOME:-$HOME/.cache}/ksweep/deps
fi
prefix=$deps/install
jobs=$(nproc 2>/dev/null || echo 2)

log() { printf '[setup] %s\n' "$*" >&2; }

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates dpkg-dev
  libopenmpi-dev openmpi-bin
  libhdf5-dev libsegyio-dev python3-segyio libfftw3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libssl-dev libxxhash-dev
  python3 python3-numpy python3-matplotlib python3-h5py
  pybind11-dev python3-pybind11 python3-pytest python3-torch python3-scipy
  curl
  clang-format-14 clang-14 libclang-rt-14-dev
)

if [ "${KSWEEP_SETUP_PROFILE:-all}" = program ]; then
  packages=(
    build-essential cmake ninja-build pkg-config git ca-certificates dpkg-dev
    libopenmpi-dev openmpi-bin
    libhdf5-dev libsegyio-dev libfftw3-dev
    libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libssl-dev libxxhash-dev
    python3 python3-numpy python3-matplotlib python3-h5py
  )
elif [ "${KSWEEP_SETUP_PROFILE:-all}" != all ]; then
  log "KSWEEP_SETUP_PROFILE='${KSWEEP_SETUP_PROFILE}' is not a profile (allowed: all, program)"
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ] && [ "${KSWEEP_SKIP_APT:-0}" != 1 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# An installed Kokkos with OpenMP wins (a system or user install on CMAKE_PREFIX_PATH).
have_kokkos_openmp() {
  local dir
  for dir in "$prefix" ${CMAKE_PREFIX_PATH:+${CMAKE_PREFIX_PATH//:/ }} /usr/local /usr /opt/kokkos; do
    [ -n "$dir" ] || continue
    for h in "$dir"/include/KokkosCore_config.h "$dir"/include/kokkos/KokkosCore_config.h; do
      if [ -f "$h" ] && grep -q 'define KOKKOS_ENABLE_OPENMP' "$h"; then
        if [ -f "$dir/include/KokkosKernels_config.h" ] || [ -f "$dir/include/kokkos/KokkosKernels_config.h" ]; then
          echo "$dir"; return 0
        fi
      fi
    done
  done
  return 1
}

if found=$(have_kokkos_openmp); then
  log "using Kokkos + Kokkos Kernels with OpenMP under $found"
  echo "$found"
  exit 0
fi

# Fetch the trilinos source package (Kokkos 3.4.01 and Kokkos Kernels 3.4.01).
src=$deps/src
mkdir -p "$src"
if ! ls -d "$src"/*/packages/kokkos >/dev/null 2>&1; then
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    log "adding a deb-src entry for bookworm"
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      | "${sudo_cmd[@]}" tee /etc/apt/sources.list.d/ksweep-src.sources >/dev/null
    "${sudo_cmd[@]}" apt-get update -qq
  fi
  log "downloading Debian's trilinos source package (Kokkos is inside)"
  (cd "$src" && apt-get source -qq --download-only trilinos >/dev/null)
  orig=$(ls "$src"/trilinos_*.orig.tar.* | head -n 1)
  log "extracting packages/kokkos and packages/kokkos-kernels from $(basename "$orig")"
  top=$( (tar -tf "$orig" 2>/dev/null || true) | head -n 1 | cut -d/ -f1)
  tar -xf "$orig" -C "$src" "$top/packages/kokkos" "$top/packages/kokkos-kernels"
fi
tsrc=$(ls -d "$src"/*/packages/kokkos | head -n 1)
tsrc=${tsrc%/packages/kokkos}

if [ ! -f "$prefix/include/KokkosCore_config.h" ]; then
  log "building Kokkos (Serial + OpenMP) into $prefix"
  cmake -S "$tsrc/packages/kokkos" -B "$deps/build-kokkos" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_CXX_STANDARD=17 -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON \
    -DKokkos_ENABLE_TESTS=OFF -DKokkos_ENABLE_EXAMPLES=OFF >/dev/null
  cmake --build "$deps/build-kokkos" -j "$jobs" >/dev/null
  cmake --install "$deps/build-kokkos" >/dev/null
fi

if [ ! -f "$prefix/include/KokkosKernels_config.h" ]; then
  log "installing Kokkos Kernels (ETI off) into $prefix"
  cmake -S "$tsrc/packages/kokkos-kernels" -B "$deps/build-kk" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_CXX_STANDARD=17 -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DKokkos_ROOT="$prefix" \
    -DKokkosKernels_INST_DOUBLE=OFF -DKokkosKernels_INST_FLOAT=OFF \
    -DKokkosKernels_INST_ORDINAL_INT=OFF -DKokkosKernels_INST_OFFSET_INT=OFF \
    -DKokkosKernels_INST_OFFSET_SIZE_T=OFF -DKokkosKernels_INST_LAYOUTLEFT=OFF \
    -DKokkosKernels_INST_EXECSPACE_OPENMP=OFF -DKokkosKernels_INST_EXECSPACE_SERIAL=OFF \
    -DKokkosKernels_INST_MEMSPACE_HOSTSPACE=OFF \
    -DKokkosKernels_ENABLE_TESTS=OFF -DKokkosKernels_ENABLE_EXAMPLES=OFF >/dev/null
  cmake --build "$deps/build-kk" -j "$jobs" >/dev/null
  cmake --install "$deps/build-kk" >/dev/null
fi

log "Kokkos + Kokkos Kernels installed under $prefix"
echo "$prefix"
