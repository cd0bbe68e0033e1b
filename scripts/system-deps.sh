#!/usr/bin/env bash
# Debian packages the test suite and the main job need, installed when missing.
#
#   scripts/system-deps.sh test   # rabbitmq-server (0-9-1 interop), amqp-specs (0-9-1 XML),
#                                 # a JRE (Spark), python3-venv
#   scripts/system-deps.sh run    # a JRE (Spark), python3-venv
#
# Idempotent and quiet when everything is there.  Needs root (or sudo) and
# apt-get only when something is missing.
set -euo pipefail
what="${1:-test}"

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
python3 -c "import ensurepip" >/dev/null 2>&1 || need+=(python3-venv)
if [ "$what" = test ]; then
    command -v rabbitmq-server >/dev/null 2>&1 || [ -x /usr/sbin/rabbitmq-server ] || need+=(rabbitmq-server)
    [ -f /usr/share/amqp/specs/0-9-1-rabbit/amqp0-9-1.stripped.extended.xml ] || need+=(amqp-specs)
fi
[ ${#need[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
        echo "system-deps: missing ${need[*]}; install them (apt-get install ${need[*]}) and re-run" >&2
        exit 1
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "system-deps: missing ${need[*]} and no apt-get here; install them by hand" >&2
    exit 1
fi
echo "system-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# A fresh rabbitmq-server package starts a system node; stop it again: the
# tests start private nodes on free loopback ports.
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
if [[ " ${need[*]} " == *" rabbitmq-server "* ]]; then
    ($sudo service rabbitmq-server stop || $sudo systemctl stop rabbitmq-server || true) >/dev/null 2>&1
    $sudo pkill -f beam.smp >/dev/null 2>&1 || true
    $sudo pkill -x epmd >/dev/null 2>&1 || true
fi
