#!/usr/bin/env bash
# Installs the Debian packages kvblk needs to build and test. Idempotent:
# packages already present are not fetched again, and apt-get update runs
# only when something is missing.
#
# Usage: scripts/install-deps.sh [user|vm|deb|bench|debug|all]   (default: all)
#   user  compilers, liburing, GoogleTest, CLI11, nlohmann-json, libnvme, jq, fio; the Python
#         package's build and tests (python3-dev, pybind11-dev, numpy, CPU torch, pytest; venv,
#         pip, setuptools and wheel for its pip install from a clone: tests/packaging/pip-test.sh)
#   vm    kernel headers and image, QEMU, busybox, dkms, nvme-cli, e2fsprogs, kernel source
#         (its kselftest harness headers) for the module tests; debootstrap
#         for the other kernels of the matrix
#   deb   make deb: debhelper, dh-dkms, dh-python, lintian (and the user packages: the
#         build dependencies in debian/control)
#   bench make bench: the user packages and python3-matplotlib (its plot; not in all)
#   debug make vmtest-debug: what building Debian's 6.1 kernel source needs (not in all)
set -euo pipefail

want=${1:-all}
user_pkgs=(build-essential cmake ninja-build pkgconf liburing-dev libgtest-dev libgmock-dev
	   libnvme-dev jq
	   libcli11-dev nlohmann-json3-dev libfmt-dev libisal-dev fio util-linux
	   python3-dev pybind11-dev python3-numpy python3-torch python3-pytest
	   python3-venv python3-pip python3-setuptools python3-wheel)
vm_pkgs=(linux-headers-amd64 linux-image-amd64 qemu-system-x86 busybox-static
	 dkms nvme-cli libnvme-dev kmod cpio xz-utils
	 debootstrap rsync  # tests/vm/kernels/mkroot.sh: trixie/sid kernel roots
	 mdadm dmsetup xfsprogs e2fsprogs  # tests/vm/cases/blk-*.sh (md RAID-0, dm-striped, ext4, xfs), libkvblk-targets (ext4)
	 linux-source  # kernel source tarball: the kselftest harness headers (tests/selftests), checkpatch.pl and kernel-doc (make -C kmod check)
	 sparse)  # make -C kmod check

deb_pkgs=(dpkg-dev debhelper dh-dkms dh-python lintian)
bench_pkgs=(python3-matplotlib)
debug_pkgs=(build-essential linux-source-6.1 bc bison flex libelf-dev libssl-dev cpio xz-utils rsync)

pkgs=()
case "$want" in
user) pkgs=("${user_pkgs[@]}") ;;
vm) pkgs=("${vm_pkgs[@]}") ;;
deb) pkgs=("${user_pkgs[@]}" "${deb_pkgs[@]}") ;;
bench) pkgs=("${user_pkgs[@]}" "${bench_pkgs[@]}") ;;
debug) pkgs=("${vm_pkgs[@]}" "${debug_pkgs[@]}") ;;
all) pkgs=("${user_pkgs[@]}" "${vm_pkgs[@]}" "${deb_pkgs[@]}") ;;
*) echo "usage: $0 [user|vm|deb|bench|debug|all]" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
