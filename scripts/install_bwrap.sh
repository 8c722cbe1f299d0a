#!/usr/bin/env bash
# Install what the jail of student code needs, once: nothing happens when it is all there.
# bubblewrap (bwrap) makes the jail; libseccomp2 builds its seccomp filter (through pyseccomp,
# in requirements.lock); prlimit, unshare and setpriv come with util-linux (present on Debian and
# Ubuntu). openssl makes the certificates of a Dask cluster (scripts/cluster_certs.sh).
set -euo pipefail

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
for tool in prlimit unshare setpriv; do
    command -v "$tool" >/dev/null 2>&1 || { missing+=(util-linux); break; }
done
/sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || missing+=(libseccomp2)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)

if [ "${#missing[@]}" -eq 0 ]; then
    echo "jail: already installed ($(bwrap --version 2>/dev/null || command -v bwrap), libseccomp2)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

if ! command -v bwrap >/dev/null 2>&1; then
    echo "bwrap: installation finished but bwrap is not on PATH" >&2
    exit 1
fi
if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then
    echo "libseccomp2: installation finished but the library is not found" >&2
    exit 1
fi
echo "jail: installed ${missing[*]} ($(bwrap --version))"
