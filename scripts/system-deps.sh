#!/usr/bin/env bash
# Debian packages the test suite and the main job need, installed when missing.
#
#   scripts/system-deps.sh test   # rabbitmq-server (0-9-1 and 1.0 interop), amqp-specs (XML),
#                                 # a JRE (Spark), python3-venv, node + npm (rhea, the
#                                 # 1.0 peer: scripts/node-deps.sh), proton's example
#                                 # broker (libqpid-proton11-dev-examples)
#   scripts/system-deps.sh run    # a JRE (Spark), python3-venv
#
# Idempotent and quiet when everything is there.  Needs root (or sudo) and
# apt-get only when something is missing.
#
# Debian's rabbitmq-server package starts a system node (and epmd) when it is
# installed; the tests start private nodes on free loopback ports and need no
# system node.  So no service may start during the install: a policy-rc.d
# that answers 101 ("action forbidden", honoured by invoke-rc.d and
# deb-systemd-invoke) is put in place for the install and removed after --
# unless one is there already, which is then left alone.  Nothing is ever
# stopped by process name: other RabbitMQ or Erlang nodes on the machine are
# not ours.  (POLICY_RC_D and RABBITMQ_SERVER_BIN are overridable for tests.)
set -euo pipefail
what="${1:-test}"
policy="${POLICY_RC_D:-/usr/sbin/policy-rc.d}"
rabbit_bin="${RABBITMQ_SERVER_BIN:-/usr/lib/rabbitmq/bin/rabbitmq-server}"

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
python3 -c "import ensurepip" >/dev/null 2>&1 || need+=(python3-venv)
if [ "$what" = test ]; then
    [ -x "$rabbit_bin" ] || need+=(rabbitmq-server)
    [ -f /usr/share/amqp/specs/0-9-1-rabbit/amqp0-9-1.stripped.extended.xml ] || need+=(amqp-specs)
    [ -f /usr/share/proton/examples/python/broker.py ] || need+=(libqpid-proton11-dev-examples)
    command -v node >/dev/null 2>&1 || need+=(nodejs)
    command -v npm >/dev/null 2>&1 || need+=(npm)
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
own_policy=""
if [[ " ${need[*]} " == *" rabbitmq-server "* ]] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# amqp-sansio scripts/system-deps.sh: no service starts during its install\nexit 101\n' \
        | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    own_policy="$policy"
    trap '$sudo rm -f "$own_policy"' EXIT
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
if [[ " ${need[*]} " == *" rabbitmq-server "* ]] && [ -z "$own_policy" ]; then
    # Someone else's policy-rc.d decided; if it let the package start its
    # node, stop that service through its init system (which knows its pid).
    if ($sudo service rabbitmq-server status || $sudo systemctl is-active rabbitmq-server) \
            >/dev/null 2>&1; then
        echo "system-deps: stopping the rabbitmq-server service the package started"
        ($sudo service rabbitmq-server stop || $sudo systemctl stop rabbitmq-server || true) \
            >/dev/null 2>&1
    fi
fi
