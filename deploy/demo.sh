#!/usr/bin/env bash
# The main job: a whole cluster on this machine (`isle up`: three servers
# and two agents, each board a network namespace with its own containerd),
# the tutorial's hello app built here for every board's architecture and
# served by the island's registry, its three replicas spread over the
# boards and reaching each other by pod IP and by their Service's name, the
# seed's hands-on check (with its curl through the Ingress on a board's
# port 80), and the Raft leader's board pulled from its power and back.
#   deploy/demo.sh start   start it (or show the one that runs)
#   deploy/demo.sh stop    remove it (isle down)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ISLE=${ISLE:-$ROOT/out/isle}
DIR=${DEMO_DIR:-/var/lib/isle-island}
export KUBECONFIG=$DIR/kubeconfig

wait_until() { # seconds, command...
  local deadline=$((SECONDS + $1))
  until "${@:2}" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "demo: timed out waiting for: ${*:2}" >&2; return 1; }
    sleep 0.5
  done
}

node_ready() { # node name, True or Unknown
  [[ $(kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == "$2" ]]
}

hello_ready() { # three hello replicas Running and Ready on the boards
  [[ $(kubectl get pods -l app=hello -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True) == 3 ]]
}

# reach: from each hello pod, GET /hello of a replica on another board by
# its pod IP, with the image's own client (`/hello get URL`).
reach() {
  local pods
  mapfile -t pods < <(kubectl get pods -l app=hello -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.podIP}{"\n"}{end}')
  for from in "${pods[@]}"; do
    read -r fname fnode _ <<<"$from"
    for to in "${pods[@]}"; do
      read -r tname tnode tip <<<"$to"
      [[ $tnode != "$fnode" ]] || continue
      printf '%s (%s) -> %s (%s on %s): ' "$fname" "$fnode" "$tip" "$tname" "$tnode"
      kubectl exec "$fname" -- /hello get "http://$tip:8080/hello"
      break
    done
  done
}

case ${1:-start} in
start)
  [[ -x $ISLE ]] || { echo "demo: $ISLE is missing: run 'make build'" >&2; exit 1; }
  command -v kubectl >/dev/null || { echo "demo: kubectl is missing: install it (apt-get install kubectl, or see README)" >&2; exit 1; }
  if [[ -f $DIR/island.json ]]; then
    echo "demo: an island runs already (in $DIR); 'make demo-down' removes it"
    "$ISLE" board list --dir "$DIR"
    kubectl get pods -o wide
    exit 0
  fi
  echo "== isle up: three servers and two agents, each board a network namespace on a LAN bridge"
  "$ISLE" up --dir "$DIR" --servers 3 --agents 2

  echo; echo "== the hello app, built here for amd64, arm64, armv7 and armv6, pushed to the island's registry"
  (cd "$ROOT" && go run ./deploy/hello/mkimage -push "$(jq -r .host "$DIR/island.json"):5000/isle/hello:1.0")

  echo; echo "== kubectl apply -f deploy/examples/hello.yaml"
  kubectl apply -f "$ROOT/deploy/examples/hello.yaml"
  wait_until 120 hello_ready
  kubectl get pods -o wide

  echo; echo "== each replica reached from a pod on another board, by its pod IP"
  reach

  echo; echo "== the Service by its name, from a pod: the cluster DNS, then the ClusterIP's rules pick a replica"
  first=$(kubectl get pods -l app=hello -o jsonpath='{.items[0].metadata.name}')
  for _ in 1 2 3 4; do kubectl exec "$first" -- /hello get http://hello/hello; done

  echo; echo "== the seed's hands-on check, verbatim, on board pi1 (localhost is the board)"
  ip netns exec isle-pi1 bash -c '
kubectl get all -A -o wide
kubectl get deploy,rs,pod,svc,ingress,pvc,hpa -A
kubectl get nodes
kubectl get pv
kubectl get --raw='"'"'/readyz'"'"' && echo
kubectl get nodes
curl -s -o /dev/null -w "外部入口 %{http_code}\n" http://localhost/hello
kubectl get endpointslices -l kubernetes.io/service-name=hello
kubectl get pvc -A
kubectl get pv
'
  echo; echo "== and from this machine to every board's port 80"
  for b in $(jq -r '.boards[].addr' "$DIR/island.json"); do
    printf '%s: ' "$b"; curl -s -o /dev/null -w "外部入口 %{http_code}\n" "http://$b/hello"
  done

  lead=$("$ISLE" member list --data-dir "$DIR/pi1/data" -o json | jq -r '.[] | select(.raft == "leader") | .name')
  echo; echo "== isle board kill $lead: the Raft leader's board loses its power"
  "$ISLE" board kill "$lead" --dir "$DIR"
  t0=$(date +%s.%N)
  wait_until 20 kubectl scale deploy hello --replicas=4
  printf 'kubectl writes resumed through the VIP after %.2f s\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
  wait_until 20 node_ready "$lead" Unknown
  printf '%s NotReady (gossip) after %.2f s\n' "$lead" "$(echo "$(date +%s.%N) - $t0" | bc)"
  kubectl get nodes

  echo; echo "== isle board start $lead: it boots, rejoins from its own disk, its routes come back"
  "$ISLE" board start "$lead" --dir "$DIR"
  wait_until 30 node_ready "$lead" True
  kubectl scale deploy hello --replicas=3
  wait_until 120 hello_ready
  kubectl get nodes
  kubectl get pods -o wide
  reach

  echo; echo "The island runs (its boards: $ISLE board list --dir $DIR). Try:"
  echo "  export KUBECONFIG=$KUBECONFIG"
  echo "  kubectl get pods -o wide; kubectl get nodes -o wide"
  echo "  ip netns exec isle-pi4 ip route     # a board's routes to the other boards' pods"
  echo "  $ISLE board kill|stop|start|restart|partition|heal pi3 --dir $DIR"
  echo "Remove it with: make demo-down"
  ;;
stop)
  if [[ -f $DIR/island.json ]]; then "$ISLE" down --dir "$DIR"; else echo "demo: no island in $DIR"; fi
  ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
