#!/usr/bin/env bash
# The main job for now: a three-member isle store on loopback, shown working.
#   deploy/demo.sh start   start it (or say it runs), write and read, kill the leader, read again
#   deploy/demo.sh stop    stop it and remove its data
set -euo pipefail
ISLE=${ISLE:-$(cd "$(dirname "$0")/.." && pwd)/out/isle}
DIR=${DEMO_DIR:-/tmp/isle-demo}
names=(pi1 pi2 pi3)

store() { "$ISLE" store --server "127.0.0.1:$1" "${@:2}"; }
port() { echo $((16443 + 10 * $1)); }   # store API: 16444, 16454, 16464; raft: +1; Kubernetes API: +2

start_member() { # index, then --init or --join ADDR --token T
  local i=$1 name=${names[$1]} p; p=$(port "$i")
  mkdir -p "$DIR/$name"
  nohup "$ISLE" server "${@:2}" --name "$name" --data-dir "$DIR/$name" --address 127.0.0.1 \
    --store-addr "127.0.0.1:$((p + 1))" --raft-port "$((p + 2))" --api-port "$((p + 3))" \
    >>"$DIR/$name.log" 2>&1 &
  echo $! >"$DIR/$name.pid"
  disown
}

wait_until() { # seconds, command...
  local deadline=$((SECONDS + $1))
  until "${@:2}" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "demo: timed out waiting for: ${*:2}" >&2; return 1; }
    sleep 0.2
  done
}

leader_index() {
  local n
  n=$(store 16444 status --leader 2>/dev/null || store 16454 status --leader 2>/dev/null || store 16464 status --leader)
  for j in 0 1 2; do
    if [[ ${names[$j]} == "$n" ]]; then echo "$j"; fi
  done
}

case ${1:-start} in
start)
  [[ -x $ISLE ]] || { echo "demo: $ISLE is missing: run 'make build'" >&2; exit 1; }
  if [[ -f $DIR/pi1.pid ]] && kill -0 "$(cat "$DIR/pi1.pid")" 2>/dev/null; then
    echo "demo: already running (data in $DIR); 'make demo-down' stops it"; exit 0
  fi
  mkdir -p "$DIR"
  echo "== starting pi1 with --init, then pi2 and pi3 with --join"
  start_member 0 --init
  wait_until 10 store 16444 status
  token=$(cat "$DIR/pi1/token")
  start_member 1 --join 127.0.0.1:16446 --token "$token"
  start_member 2 --join 127.0.0.1:16446 --token "$token"
  wait_until 20 bash -c "'$ISLE' store --server 127.0.0.1:16444 status | grep -cE '^[0-9a-f]+ +[^ ]+ +(voter|leader) ' | grep -qx 3"
  store 16444 status
  echo; echo "== write on pi1, read (linearizable) on pi3"
  store 16444 put /demo/greeting "hello from isle"
  store 16464 get /demo/greeting
  lead=$(leader_index)
  echo; echo "== kill -9 the leader (${names[$lead]}), write again through a survivor"
  kill -9 "$(cat "$DIR/${names[$lead]}.pid")"
  other=$(( (lead + 1) % 3 ))
  t0=$(date +%s.%N)
  wait_until 10 store "$(( $(port $other) + 1 ))" put /demo/after-failover ok
  printf 'writes resumed after %.2f s\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
  store "$(( $(port $other) + 1 ))" get /demo/greeting
  echo; echo "== restart ${names[$lead]}: it rejoins from its own disk"
  start_member "$lead"
  wait_until 10 store "$(( $(port "$lead") + 1 ))" get /demo/after-failover
  store "$(( $(port "$lead") + 1 ))" status
  echo; echo "The store runs on 127.0.0.1:16444, :16454, :16464. Try:"
  echo "  $ISLE store --server 127.0.0.1:16444 status"
  echo "Stop it with: make demo-down"
  ;;
stop)
  for n in "${names[@]}"; do
    [[ -f $DIR/$n.pid ]] && kill "$(cat "$DIR/$n.pid")" 2>/dev/null || true
  done
  rm -rf "$DIR"; echo "demo: stopped"
  ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
