#!/usr/bin/env bash
# A chain of boards as the reference design wires it (master -> node 1 -> ... -> node N -> master),
# each board its own emulator (or host process) running the board runner's cluster role
# (targets/runner: role=master / role=node, the firmware's board::Master / board::Node), its SPI
# link (TX to the next board, RX from the previous one) a named pipe per hop. The images are the
# per-node images of `mcullm convert --image --nodes N` (the master's carries the nodes' plan and
# their slice hashes); the master's fingerprint must equal `mcullm run --fingerprint`'s.
#
# usage: tools/run_chain.sh [options] MODEL
#   --target T        host (mcullm_board processes), esp32-lx7 (Debian's QEMU -M sim -cpu de233_fpu,
#                     -icount shift=0: instructions per hidden state per node) or esp32s3 (the PIE
#                     kernels on tools/esp32s3-qemu/build.sh's QEMU, given with --qemu)   [esp32-lx7]
#   --qemu PATH       qemu-system-xtensa with -cpu esp32s3 (--target esp32s3)
#   --nodes N         nodes in the ring (6)          -n N   tokens to generate (32)
#   --prompt-ids IDS  (1,403,407)   --temp T --seed S   sampling (1 and 3)
#   --cores 2         every board splits its pool tasks with its second core (QEMU -smp 2)
#   --kernels K       the boards' kernel table (auto; esp32s3: pie)
#   --swap A,B        flash node A's image on node B and B's on A: the master must refuse the ring at
#                     hello (the test that the slice check runs on the boards); exit 0 when it does
#   --pc-master       the master is a PC (`mcullm cluster --topology ring`) driving the boards as nodes
#   --streams K       --pc-master: K streams in flight through the ring at once (seeds S, S+1, ...; each
#                     board node keeps K stream slots, the runner's streams=K); every stream's
#                     fingerprint must equal `mcullm run --seed S+i`'s                          [1]
#   --pc-nodes        the nodes are PCs (`mcullm node --ring`) and a board is the master
#                     (both: socat joins the boards' named pipes to the PCs' TCP links; the bytes are the
#                     same frames: targets/runner/runner_hal.h)
#   --build DIR       the release build with mcullm and mcullm_board (build/release)
#   --work DIR        scratch directory (a fresh one under $TMPDIR)
# Exit 0: the fingerprints are equal (or the swap was refused); 1: a mismatch or failure; 77: skipped
# because QEMU or a cross toolchain is missing (MCULLM_REQUIRE_TARGETS=1: fail instead, as CI does).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build/release WORK="" TARGET=esp32-lx7 QEMU="" NODES=6 N=32 IDS=1,403,407 TEMP=1 SEED=3 CORES=1 KERNELS="" SWAP="" PC="" STREAMS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --target) TARGET=$2; shift 2 ;;
    --qemu) QEMU=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    --prompt-ids) IDS=$2; shift 2 ;;
    --temp) TEMP=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --cores) CORES=$2; shift 2 ;;
    --kernels) KERNELS=$2; shift 2 ;;
    --swap) SWAP=$2; shift 2 ;;
    --pc-master) PC=master; shift ;;
    --streams) STREAMS=$2; shift 2 ;;
    --pc-nodes) PC=nodes; shift ;;
    --build) BUILD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    -*) echo "run_chain: unknown option $1" >&2; exit 1 ;;
    *) MODEL=$1; shift ;;
  esac
done
[ -n "${MODEL:-}" ] && [ -f "$MODEL" ] || { echo "run_chain: give a model file (see --help)" >&2; exit 1; }
BUILD=$(cd "$BUILD" && pwd)
MCULLM=$BUILD/mcullm
BOARD=$BUILD/mcullm_board
for f in "$MCULLM" "$BOARD"; do
  [ -x "$f" ] || { echo "run_chain: $f is missing: build it (cmake --build $BUILD --target mcullm mcullm_board)" >&2; exit 1; }
done
skip() {
  if [ "${MCULLM_REQUIRE_TARGETS:-0}" = 1 ]; then echo "run_chain: FAIL: $*" >&2; exit 1; fi
  echo "run_chain: SKIP: $*"
  exit 77
}

case "$STREAMS" in
  ''|*[!0-9]*|0) echo "run_chain: --streams takes a count of 1..8" >&2; exit 1 ;;
esac
[ "$STREAMS" -le 8 ] || { echo "run_chain: --streams takes a count of 1..8" >&2; exit 1; }
[ "$STREAMS" = 1 ] || [ "$PC" = master ] || { echo "run_chain: --streams is for --pc-master (a board master drives one stream)" >&2; exit 1; }

if [ -n "$PC" ]; then
  command -v socat >/dev/null || skip "missing socat (apt-get install socat): it joins the boards' pipes to the PCs' TCP links"
  [ -z "$SWAP" ] || { echo "run_chain: --swap is for a chain of boards" >&2; exit 1; }
fi

# The board runner for the target.
case "$TARGET" in
  host) ;;
  esp32-lx7)
    for tool in qemu-system-xtensa clang-22 xtensa-lx106-elf-ld; do
      command -v "$tool" >/dev/null || skip "missing $tool (apt-get install qemu-system-misc clang-22 binutils-xtensa-lx106)"
    done
    ls /usr/src/gcc-12/gcc-12*.tar.xz >/dev/null 2>&1 || skip "missing gcc-12-source (the LX7 runtime's libgcc sources)"
    QEMU=qemu-system-xtensa CPU=de233_fpu
    TB=$BUILD/targets
    mkdir -p "$TB"
    flock "$TB/.lock" make -s -C "$ROOT/targets" B="$TB" -j2 esp32 >"$TB/make-chain.log" 2>&1 ||
      { cat "$TB/make-chain.log" >&2; echo "run_chain: FAIL: the LX7 build failed" >&2; exit 1; }
    ELF=$TB/esp32-lx7.elf ;;
  esp32s3)
    [ -n "$QEMU" ] && [ -x "$QEMU" ] || { echo "run_chain: --target esp32s3 needs --qemu (tools/esp32s3-qemu/build.sh's)" >&2; exit 1; }
    CPU=esp32s3
    [ -n "$KERNELS" ] || KERNELS=pie
    [ -n "$WORK" ] || WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcullm-chain.XXXXXX")
    mkdir -p "$WORK"
    . "$ROOT/tools/esp32s3-pie/board_common.sh"
    board_build_elf ;;
  *) echo "run_chain: --target takes host, esp32-lx7 or esp32s3" >&2; exit 1 ;;
esac
[ -n "$KERNELS" ] || KERNELS=auto

[ -n "$WORK" ] || WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcullm-chain.XXXXXX")
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
"$MCULLM" convert "$MODEL" --image "$WORK/chain.img" --nodes "$NODES" >"$WORK/convert.log" 2>&1 ||
  { cat "$WORK/convert.log" >&2; echo "run_chain: FAIL: convert --nodes $NODES" >&2; exit 1; }
echo "$IDS" | tr ',' ' ' >"$WORK/prompt.txt"
image_of() { echo "$WORK/chain.node$1.img"; }
if [ -n "$SWAP" ]; then
  a=${SWAP%,*} b=${SWAP#*,}
  case "$a,$b" in
    *[!0-9,]*|,*|*,) echo "run_chain: --swap takes two node numbers A,B" >&2; exit 1 ;;
  esac
  [ "$a" != "$b" ] && [ "$a" -ge 1 ] && [ "$b" -ge 1 ] && [ "$a" -le "$NODES" ] && [ "$b" -le "$NODES" ] ||
    { echo "run_chain: --swap takes two different nodes of 1..$NODES" >&2; exit 1; }
  mv "$(image_of "$a")" "$WORK/swap.img" && mv "$(image_of "$b")" "$(image_of "$a")" && mv "$WORK/swap.img" "$(image_of "$b")"
fi

# The hops: link k runs into node k (link N+1 back into the master).
rm -f "$WORK"/link*
for k in $(seq 1 $((NODES + 1))); do mkfifo "$WORK/link$k"; done

# board OUT ARGS...: one board (its stdout and stderr to OUT).
board() {
  local out=$1
  shift
  local args=("$@" kernels="$KERNELS" cores="$CORES")
  if [ "$TARGET" = host ]; then
    timeout 600 "$BOARD" "${args[@]}" >"$out" 2>&1
  else
    local semi="enable=on,target=native,arg=board"
    for a in "${args[@]}"; do semi="$semi,arg=${a//,/,,}"; done
    timeout 600 "$QEMU" -M sim -cpu "$CPU" -smp "$CORES" -m 128M -kernel "$ELF" -display none -monitor none \
      -semihosting -icount shift=0 -semihosting-config "$semi" >"$out" 2>&1
  fi
}

# The board master: the master image, the prompt, the sampler; its output is the ring's last pipe.
board_master() {
  board "$WORK/master.out" role=master image="$WORK/chain.master.img" prompt="$WORK/prompt.txt" n="$N" temp="$TEMP" \
    seed="$SEED" work=psram link_in="$WORK/link$((NODES + 1))" link_out="$WORK/link1"
}

# Free TCP ports for the PC links: P[0] the PC master's --listen, P[k] node k's.
free_ports() {
  /usr/bin/python3 - "$1" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}
pids=() helpers=()
rc=0
if [ "$PC" = nodes ]; then
  read -r -a P <<<"$(free_ports $((NODES + 2)))"
  # the last PC node sends to P[N+1], which socat passes into the board master's input pipe
  socat -u TCP-LISTEN:"${P[$((NODES + 1))]}",bind=127.0.0.1,reuseaddr,nodelay PIPE:"$WORK/link$((NODES + 1))" 2>"$WORK/socat-in.log" &
  helpers+=($!)
  for k in $(seq "$NODES" -1 1); do
    next=${P[$((k + 1))]}
    timeout 600 "$MCULLM" node --ring -m "$MODEL" --listen 127.0.0.1:"${P[$k]}" --next 127.0.0.1:"$next" >"$WORK/node$k.out" 2>&1 &
    pids+=($!)
  done
  socat -u PIPE:"$WORK/link1" TCP:127.0.0.1:"${P[1]}",retry=100,interval=0.1,nodelay 2>"$WORK/socat-out.log" &
  helpers+=($!)
  board_master || rc=$?
else
  for k in $(seq 1 "$NODES"); do
    board "$WORK/node$k.out" role=node image="$(image_of "$k")" work=psram streams="$STREAMS" link_in="$WORK/link$k" \
      link_out="$WORK/link$((k + 1))" &
    pids+=($!)
  done
  if [ "$PC" = master ]; then
    read -r -a P <<<"$(free_ports 2)"
    # the PC master connects to P[1], which socat passes into node 1's pipe; node N's output goes to its --listen P[0]
    socat -u TCP-LISTEN:"${P[1]}",bind=127.0.0.1,reuseaddr,nodelay PIPE:"$WORK/link1" 2>"$WORK/socat-in.log" &
    helpers+=($!)
    socat -u PIPE:"$WORK/link$((NODES + 1))" TCP:127.0.0.1:"${P[0]}",retry=100,interval=0.1,nodelay 2>"$WORK/socat-out.log" &
    helpers+=($!)
    nodes=127.0.0.1:${P[1]}
    for k in $(seq 2 "$NODES"); do nodes="$nodes,127.0.0.1:9"; done  # only the first is connected: the rest give the ring its length
    timeout 600 "$MCULLM" cluster -m "$MODEL" --prompt-ids "$IDS" -n "$N" --temp "$TEMP" -s "$SEED" --fingerprint -q \
      --topology ring --streams "$STREAMS" --nodes "$nodes" --listen 127.0.0.1:"${P[0]}" >"$WORK/master.out" 2>&1 || rc=$?
  else
    board_master || rc=$?
  fi
fi
# The master's end closes its links, and the ring ends node after node; one that does not within 60 s
# is stopped (a board that failed before joining the ring would leave its neighbours waiting).
for _ in $(seq 1 600); do
  alive=0
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && break
  sleep 0.1
done
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && { pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; }; done
for p in "${helpers[@]}"; do kill "$p" 2>/dev/null || true; done
node_rcs=()
for p in "${pids[@]}"; do
  r=0
  wait "$p" || r=$?
  node_rcs+=("$r")
done

case "$PC" in
  master) who="a PC master (mcullm cluster --topology ring) and $NODES nodes on $TARGET" ;;
  nodes) who="a master on $TARGET and $NODES PC nodes (mcullm node --ring)" ;;
  *) who="a master and $NODES nodes on $TARGET" ;;
esac
streams=""
[ "$STREAMS" = 1 ] || streams=", $STREAMS streams (seeds $SEED..$((SEED + STREAMS - 1)))"
echo "model $MODEL, $who (kernels $KERNELS, cores $CORES), prompt $IDS, $N tokens, temp $TEMP, seed $SEED$streams"
if [ -n "$SWAP" ]; then
  # The master stops at hello with the node's refusal; nothing is generated.
  if [ "$rc" != 0 ] && grep -q "this node's image holds layers" "$WORK/master.out" && ! grep -q '^fingerprint' "$WORK/master.out"; then
    echo "refused as it must be: $(grep -m1 'board: error' "$WORK/master.out")"
    exit 0
  fi
  echo "run_chain: FAIL: the ring with node images $SWAP swapped was not refused (master exit $rc)" >&2
  cat "$WORK/master.out" >&2
  exit 1
fi
# Each stream's fingerprint against `mcullm run` with its seed (one stream: the master's only line).
mismatch=0
for i in $(seq 0 $((STREAMS - 1))); do
  pc=$("$MCULLM" run -m "$MODEL" --prompt-ids "$IDS" -n "$N" --temp "$TEMP" -s $((SEED + i)) --fingerprint -q 2>/dev/null |
    grep '^fingerprint' | cut -d' ' -f2)
  if [ "$STREAMS" = 1 ]; then
    fp=$(grep '^fingerprint' "$WORK/master.out" | cut -d' ' -f2 || true)
    tag=""
  else
    fp=$(grep "^stream $i fingerprint" "$WORK/master.out" | cut -d' ' -f4 || true)
    tag=" (stream $i, seed $((SEED + i)))"
  fi
  echo "pc     fingerprint $pc$tag"
  echo "master fingerprint $fp (exit $rc)$tag"
  [ -n "$fp" ] && [ "$fp" = "$pc" ] || mismatch=1
done
grep -h '^master:\|^per sampled token' "$WORK/master.out" | sed 's/^master: //; s/^/  master: /' || true
fail=0
for k in $(seq 1 "$NODES"); do
  line=$(grep -h '^node: layers' "$WORK/node$k.out" || true)
  [ "$PC" = nodes ] && line=$(grep -h 'ring node' "$WORK/node$k.out" | tail -1 || true) && line=${line:-"(PC node: no summary line)"}
  echo "  node $k (exit ${node_rcs[$((k - 1))]}): ${line#node: }"
  if [ "${node_rcs[$((k - 1))]}" != 0 ] || [ -z "$line" ]; then fail=1; tail -3 "$WORK/node$k.out" >&2; fi
done
if [ "$rc" != 0 ] || [ "$mismatch" != 0 ]; then
  fail=1
  tail -5 "$WORK/master.out" >&2
fi
[ "$fail" = 0 ] && echo "equal" || echo "run_chain: FAIL: the chain's fingerprint differs from the PC's, or a board failed" >&2
exit $fail
