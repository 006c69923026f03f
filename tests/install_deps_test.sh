#!/bin/bash
# tools/install-deps.sh, the first thing `make run` and `make test` do on a fresh machine:
#  1. a clean machine, simulated: the script on an empty PATH with stand-ins for dpkg-query (nothing
#     installed), id and apt-get (which record their calls). As a user it must list the packages,
#     print the sudo command and fail without calling apt-get; as root it must run apt-get update
#     once, then one install of exactly the missing list; --dry-run never installs; npm only when
#     there is no npm; `test` holds everything `run` does;
#  2. this machine: --dry-run's line in its one format, every package it lists not installed
#     (dpkg-query asked here, package by package) and every package it leaves out installed.
# Usage: install_deps_test.sh tools/install-deps.sh WORKDIR
set -u
SCRIPT=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK/bin" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# stand-ins: nothing installed; `id -u` prints $FAKE_UID; apt-get appends its arguments to a log
cat >"$WORK/bin/dpkg-query" <<'EOF'
#!/bin/bash
for a in "$@"; do case "$a" in -*) ;; *) echo "dpkg-query: no packages found matching $a" >&2 ;; esac; done
exit 1
EOF
cat >"$WORK/bin/id" <<'EOF'
#!/bin/bash
echo "$FAKE_UID"
EOF
cat >"$WORK/bin/apt-get" <<'EOF'
#!/bin/bash
echo "$*" >>"$APT_LOG"
EOF
chmod +x "$WORK/bin/"*
export APT_LOG="$WORK/apt.log"

# run_clean UID ARGS...: the script on a PATH of stand-ins only; sets out, err, rc
run_clean() {
  local uid=$1; shift
  : >"$APT_LOG"
  out=$(FAKE_UID=$uid PATH="$WORK/bin" /bin/bash "$SCRIPT" "$@" 2>"$WORK/err")
  rc=$?
  err=$(<"$WORK/err")
}
list_of() { local line=$1; echo "${line#install-deps: missing: }"; }  # the packages of a "missing:" line

# 1. a clean machine
run_clean 1000 run
[ "$rc" = 1 ] || fail "run as a user with packages missing: exit $rc, want 1"
case "$out" in "install-deps: missing: "*) ;; *) fail "run: stdout '$out', want 'install-deps: missing: ...'" ;; esac
run_list=$(list_of "$out")
for p in cmake make g++ pkg-config libcli11-dev nlohmann-json3-dev; do
  case " $run_list " in *" $p "*) ;; *) fail "run: '$p' (the CLI build needs it) is not listed: $run_list" ;; esac
done
for p in libgtest-dev chromium python3-torch npm; do
  case " $run_list " in *" $p "*) fail "run lists '$p', which only the tests need" ;; esac
done
case "$err" in *"sudo apt-get update && sudo apt-get install -y --no-install-recommends $run_list"*) ;;
  *) fail "run as a user: no sudo command for the same list on stderr: $err" ;; esac
[ ! -s "$APT_LOG" ] || fail "run as a user called apt-get: $(<"$APT_LOG")"

run_clean 0 run
[ "$rc" = 0 ] || fail "run as root: exit $rc ($err)"
want_log=$(printf 'update -q\ninstall -y -q --no-install-recommends %s' "$run_list")
[ "$(<"$APT_LOG")" = "$want_log" ] || fail "run as root: apt-get calls
$(<"$APT_LOG")
want
$want_log"

run_clean 0 --dry-run run test plots train
[ "$rc" = 0 ] || fail "--dry-run: exit $rc"
[ ! -s "$APT_LOG" ] || fail "--dry-run called apt-get: $(<"$APT_LOG")"
all_list=$(list_of "$out")

run_clean 1000 --dry-run test
test_list=$(list_of "$out")
for p in $run_list; do
  case " $test_list " in *" $p "*) ;; *) fail "test does not hold run's '$p'" ;; esac
done
case " $test_list " in *" npm "*) ;; *) fail "test without any npm on PATH does not list npm: $test_list" ;; esac
printf '#!/bin/bash\n' >"$WORK/bin/npm" && chmod +x "$WORK/bin/npm"
run_clean 1000 --dry-run test
case " $(list_of "$out") " in *" npm "*) fail "test lists npm although npm is on PATH (NodeSource's nodejs conflicts with it)" ;; esac
rm "$WORK/bin/npm"
declare -A seen=()
for p in $all_list; do
  [ -z "${seen[$p]:-}" ] || fail "'$p' is listed twice"
  seen[$p]=1
done

run_clean 0 --dry-run nonsense
[ "$rc" = 2 ] || fail "an unknown group: exit $rc, want 2"

# 2. this machine
line=$("$SCRIPT" --dry-run run test plots train)
rc=$?
echo "this machine: $line"
[ "$rc" = 0 ] || fail "--dry-run here: exit $rc"
[ "$(printf '%s\n' "$line" | wc -l)" = 1 ] || fail "--dry-run printed more than one line: $line"
if [ "$line" = "install-deps: nothing missing" ]; then
  missing=
elif [[ "$line" =~ ^install-deps:\ missing:\ [a-z0-9.+-]+(\ [a-z0-9.+-]+)*$ ]]; then
  missing=$(list_of "$line")
else
  fail "--dry-run's line is in neither format: '$line'"
  missing=
fi
for p in $all_list; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)
  case " $missing " in
    *" $p "*) [ "$status" != installed ] || fail "'$p' is listed as missing but dpkg says installed" ;;
    *) [ "$status" = installed ] || [ "$p" = npm ] || fail "'$p' is not listed as missing but dpkg says '${status:-unknown}'" ;;
  esac
done

[ "$fails" = 0 ] || { echo "install_deps_test: $fails failure(s)"; exit 1; }
echo "install_deps_test: PASS ($(echo $all_list | wc -w) packages in all groups)"
