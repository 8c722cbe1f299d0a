#!/usr/bin/env bash
# Certificates for grading on a Dask cluster with mutual TLS (README: Grading on more than one
# machine): a certificate authority (CA) of the cluster's own, and a key and a certificate signed
# by it for the scheduler, the workers and the grading process. Each side accepts only peers
# whose certificate this CA signed. Keep ca.key away from the cluster machines.
#
#   bash scripts/cluster_certs.sh DIR [DAYS]     (DAYS: how long they are valid, default 365)
set -euo pipefail
dir="${1:?usage: bash scripts/cluster_certs.sh DIR [DAYS]}"
days="${2:-365}"
mkdir -p "$dir"
chmod 700 "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -out ca.pem -days "$days" -subj "/CN=autograder cluster CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
for role in scheduler worker client; do
  key "$role.key"
  openssl req -new -key "$role.key" -out "$role.csr" -subj "/CN=autograder $role"
  printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n' >"$role.ext"
  openssl x509 -req -in "$role.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
    -extfile "$role.ext" -out "$role.pem" 2>/dev/null
  rm "$role.csr" "$role.ext"
done
chmod 600 ./*.key
echo "in $dir: ca.pem, and scheduler, worker and client .pem and .key (keep ca.key apart)"
