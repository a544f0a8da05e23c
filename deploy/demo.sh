#!/usr/bin/env bash
# The main job for now: three isle servers and one agent on loopback (store,
# Kubernetes API, gossip), driven with the real kubectl, surviving kill -9 of
# the Raft leader, whose Node goes NotReady within seconds and comes back.
#   deploy/demo.sh start   start it (or say it runs) and show it working
#   deploy/demo.sh stop    stop it and remove its data
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ISLE=${ISLE:-$ROOT/out/isle}
DIR=${DEMO_DIR:-/tmp/isle-demo}
names=(pi1 pi2 pi3 pi4) # three servers, one agent

# Ports of board i: store debug API 16444+10i, raft +1, Kubernetes API +2,
# gossip +3 (boards on a LAN each have their own address and use 7946).
store_port() { echo $((16444 + 10 * $1)); }
api_port() { echo $((16446 + 10 * $1)); }
gossip_port() { echo $((16447 + 10 * $1)); }
store() { "$ISLE" store --server "127.0.0.1:$(store_port "$1")" "${@:2}"; }
k() { # board index, then kubectl arguments
  KUBECONFIG="$DIR/kubeconfig-${names[$1]}" HOME="$DIR/home" kubectl "${@:2}"
}

start_member() { # index, then --init or --join ADDR --token T
  local i=$1 name=${names[$1]}
  mkdir -p "$DIR/$name"
  nohup "$ISLE" server "${@:2}" --name "$name" --data-dir "$DIR/$name" --address 127.0.0.1 \
    --store-addr "127.0.0.1:$(store_port "$i")" --raft-port "$(($(store_port "$i") + 1))" \
    --api-port "$(api_port "$i")" --gossip-port "$(gossip_port "$i")" --containerd none >>"$DIR/$name.log" 2>&1 &
  echo $! >"$DIR/$name.pid"
  disown
}

start_agent() { # index, then --join ADDR --token T
  local name=${names[$1]}
  mkdir -p "$DIR/$name"
  nohup "$ISLE" agent "${@:2}" --name "$name" --data-dir "$DIR/$name" --address 127.0.0.1 \
    --gossip-port "$(gossip_port "$1")" --containerd none >>"$DIR/$name.log" 2>&1 &
  echo $! >"$DIR/$name.pid"
  disown
}

node_ready() { # board index to ask, node name, True or Unknown
  [[ $(k "$1" get node "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == "$3" ]]
}

wait_until() { # seconds, command...
  local deadline=$((SECONDS + $1))
  until "${@:2}" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "demo: timed out waiting for: ${*:2}" >&2; return 1; }
    sleep 0.2
  done
}

voters() { store 0 status | grep -cE '^[0-9a-f]+ +[^ ]+ +(voter|leader) '; }

leader_index() {
  local n
  n=$(store 0 status --leader 2>/dev/null || store 1 status --leader 2>/dev/null || store 2 status --leader)
  for j in 0 1 2; do
    if [[ ${names[$j]} == "$n" ]]; then echo "$j"; fi
  done
}

case ${1:-start} in
start)
  [[ -x $ISLE ]] || { echo "demo: $ISLE is missing: run 'make build'" >&2; exit 1; }
  command -v kubectl >/dev/null || { echo "demo: kubectl is missing: install it (apt-get install kubectl, or see README)" >&2; exit 1; }
  if [[ -f $DIR/pi1.pid ]] && kill -0 "$(cat "$DIR/pi1.pid")" 2>/dev/null; then
    echo "demo: already running (data in $DIR); 'make demo-down' stops it"; exit 0
  fi
  mkdir -p "$DIR/home"
  echo "== pi1 starts the cluster (--init); pi2 and pi3 join through it with its token; the agent pi4 through pi2"
  start_member 0 --init
  wait_until 15 store 0 status
  token=$(cat "$DIR/pi1/token")
  start_member 1 --join "127.0.0.1:$(gossip_port 0)" --token "$token"
  start_member 2 --join "127.0.0.1:$(gossip_port 0)" --token "$token"
  start_agent 3 --join "127.0.0.1:$(gossip_port 1)" --token "$token"
  wait_until 30 bash -c "[[ \$('$ISLE' store --server 127.0.0.1:$(store_port 0) status | grep -cE '^[0-9a-f]+ +[^ ]+ +(voter|leader) ') == 3 ]]"
  for i in 0 1 2; do
    "$ISLE" kubeconfig --data-dir "$DIR/${names[$i]}" -o "$DIR/kubeconfig-${names[$i]}" --server "https://127.0.0.1:$(api_port "$i")"
  done
  store 0 status
  wait_until 15 k 0 get namespace default
  for n in "${names[@]}"; do wait_until 30 node_ready 0 "$n" True; done
  "$ISLE" member list --data-dir "$DIR/pi1"

  echo; echo "== kubectl against pi1"
  k 0 get --raw='/readyz' && echo
  k 0 get namespaces
  k 0 get nodes -o wide
  k 0 apply -f "$ROOT/deploy/examples/hello.yaml"
  k 0 get deploy,rs,pod,svc,ingress,pvc,hpa -A
  echo "(the controllers made the ReplicaSet and its pods and the scheduler placed them on the Nodes; nothing runs them until the node agent's runtime comes)"

  lead=$(leader_index)
  other=$(((lead + 1) % 3))
  echo; echo "== kill -9 the Raft leader (${names[$lead]}); kubectl through ${names[$other]}"
  kill -9 "$(cat "$DIR/${names[$lead]}.pid")"
  t0=$(date +%s.%N)
  wait_until 15 k "$other" scale deploy hello --replicas=4
  printf 'writes resumed after %.2f s\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
  k "$other" get deploy hello
  wait_until 20 node_ready "$other" "${names[$lead]}" Unknown
  printf '%s NotReady (gossip) after %.2f s\n' "${names[$lead]}" "$(echo "$(date +%s.%N) - $t0" | bc)"
  k "$other" get nodes

  echo; echo "== restart ${names[$lead]}: it rejoins from its own disk"
  start_member "$lead"
  wait_until 15 k "$lead" get --raw=/readyz
  wait_until 20 node_ready "$lead" "${names[$lead]}" True
  k "$lead" get nodes
  k "$lead" get deploy hello -o jsonpath='{.metadata.name}: {.spec.replicas} replicas wanted{"\n"}'
  store "$lead" status

  echo; echo "Three servers and an agent run on 127.0.0.1 (Kubernetes API on :$(api_port 0), :$(api_port 1), :$(api_port 2)). Try:"
  echo "  export KUBECONFIG=$DIR/kubeconfig-pi2"
  echo "  kubectl get all -A -o wide; kubectl get nodes"
  echo "  $ISLE member list --data-dir $DIR/pi1"
  echo "Stop it with: make demo-down"
  ;;
stop)
  for n in "${names[@]}"; do
    if [[ -f $DIR/$n.pid ]]; then kill "$(cat "$DIR/$n.pid")" 2>/dev/null || true; fi
  done
  rm -rf "$DIR"; echo "demo: stopped"
  ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
