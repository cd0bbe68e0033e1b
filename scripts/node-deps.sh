#!/usr/bin/env bash
# The npm packages the tests and bench use as independent AMQP 1.0 peers
# (rhea), installed into a cache directory -- never into the repository's
# tracked files.  Idempotent and quiet when they are there.
#
#   scripts/node-deps.sh            # into .cache/node (or $AMQP_SANSIO_NODE_DIR)
#
# Needs node and npm (Debian: apt-get install nodejs npm; scripts/system-deps.sh
# installs them when missing).
set -euo pipefail
RHEA_VERSION="3.0.5"
dir="${AMQP_SANSIO_NODE_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.cache/node}"
if [ -f "$dir/node_modules/rhea/package.json" ] && \
   grep -q "\"version\": \"$RHEA_VERSION\"" "$dir/node_modules/rhea/package.json"; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "node-deps: npm is missing (apt-get install npm)" >&2
    exit 1
fi
mkdir -p "$dir"
echo "node-deps: installing rhea@$RHEA_VERSION into $dir"
npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error "rhea@$RHEA_VERSION" >/dev/null
