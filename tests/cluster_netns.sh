#!/bin/sh
# `mcullm cluster` across network namespaces: 6 nodes in their own namespace, reached by the
# master over a veth pair, must give the fingerprint of `mcullm run`. Needs root and a kernel that
# lets us make namespaces (CI containers often do not): exit 77 (skipped) with the reason otherwise.
# Usage: cluster_netns.sh MCULLM WORKDIR
set -u
MCULLM=$1
WORK=$2
mkdir -p "$WORK"
NS=mcullm-t$$
VH=mch$$
VN=mcn$$
NET=10.213.$(($$ % 250)).
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null 2>&1 || skip "no 'ip' (iproute2)"
ip netns add "$NS" 2>/dev/null || skip "this machine does not allow 'ip netns add' (a container without CAP_SYS_ADMIN?)"
PIDS=
cleanup() {
  for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
  ip link del "$VH" 2>/dev/null
  ip netns del "$NS" 2>/dev/null
}
trap cleanup EXIT
ip link add "$VH" type veth peer name "$VN" || skip "cannot make a veth pair"
ip link set "$VN" netns "$NS" || skip "cannot move a veth end into the namespace"
ip addr add "${NET}1/24" dev "$VH" && ip link set "$VH" up || exit 1
ip netns exec "$NS" ip addr add "${NET}2/24" dev "$VN" || exit 1
ip netns exec "$NS" ip link set "$VN" up || exit 1
ip netns exec "$NS" ip link set lo up || exit 1

M="$WORK/model.gguf"
"$MCULLM" dummy -o "$M" --layers 12 --dim 64 --heads 4 --kv-heads 2 --hidden 128 --seq-len 128 2>/dev/null || exit 1
WANT=$("$MCULLM" run -m "$M" -p "the big dog" -n 30 --temp 1 --seed 5 --fingerprint -q 2>/dev/null | grep '^fingerprint')
LIST=
rm -f "$WORK"/node*.out  # a port left by an earlier run must not be read before the new node writes
for i in 0 1 2 3 4 5; do
  : >"$WORK/node$i.out"
  ip netns exec "$NS" "$MCULLM" node -m "$M" --layers $((2 * i)):$((2 * i + 2)) --listen "${NET}2:0" --once \
    >"$WORK/node$i.out" 2>"$WORK/node$i.err" &
  PIDS="$PIDS $!"
  PORT=
  for t in $(seq 1 600); do
    PORT=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$WORK/node$i.out")
    [ -n "$PORT" ] && break
    sleep 0.05
  done
  [ -n "$PORT" ] || { echo "node $i did not listen:"; cat "$WORK/node$i.err"; exit 1; }
  LIST="$LIST${LIST:+,}${NET}2:$PORT"
done
GOT=$(timeout 60 "$MCULLM" cluster -m "$M" -p "the big dog" -n 30 --temp 1 --seed 5 --fingerprint -q --nodes "$LIST" 2>"$WORK/master.err" | grep '^fingerprint')
cat "$WORK/master.err"
echo "one process: $WANT"
echo "cluster:     $GOT"
[ -n "$WANT" ] && [ "$WANT" = "$GOT" ]
