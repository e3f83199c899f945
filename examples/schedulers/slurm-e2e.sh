#!/usr/bin/env bash
# End to end on a real scheduler: installs Debian's slurm-wlm (if needed), starts a one-node
# Slurm cluster on this machine (munged, slurmctld, slurmd), plans two sharded conversions,
# runs every unit as a Slurm array job, finalizes, and compares the shards and index byte for
# byte with what one `ztensor convert IN OUTDIR/` writes. Needs root (apt-get, the daemons).
# Not part of the default test command: it installs packages and takes a minute or two.
# It refuses to run where Slurm or munge already run or /etc/slurm/slurm.conf exists.
#
#   bash examples/schedulers/slurm-e2e.sh            # uses target/release/ztensor (built if missing)
#   ZTENSOR=/path/to/ztensor bash examples/schedulers/slurm-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)

# Safe to run anywhere: a machine that already runs Slurm or munge, or has a system Slurm
# configuration, is left alone (nothing is stopped, rewritten or created outside a private
# directory). The cluster started here reads only its own configuration (SLURM_CONF), keeps its
# spool, state, logs, pid files and munge socket and key in a temporary directory, and is
# stopped by the process ids it started.
SYSTEM_CONF=${SLURM_E2E_SYSTEM_CONF:-/etc/slurm/slurm.conf}
running() { # NAME: whether a process of that name runs here (read from /proc: no procps needed)
  local comm
  for comm in /proc/[0-9]*/comm; do
    [ "$(cat "$comm" 2>/dev/null)" = "$1" ] && return 0
  done
  return 1
}
if [ -e "$SYSTEM_CONF" ]; then
  echo "slurm-e2e: $SYSTEM_CONF exists: this machine is configured for Slurm; refusing to run here" >&2
  exit 2
fi
for daemon in munged slurmctld slurmd slurmdbd slurmstepd; do
  if running "$daemon"; then
    echo "slurm-e2e: $daemon is already running here; refusing to start a second cluster beside it" >&2
    exit 2
  fi
done
if [ "$(id -u)" != 0 ]; then
  echo "slurm-e2e: needs root (it installs slurm-wlm and starts its daemons)" >&2
  exit 2
fi
if ! command -v slurmctld >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm >/dev/null
fi
ZTENSOR=${ZTENSOR:-$ROOT/target/release/ztensor}
if [ ! -x "$ZTENSOR" ]; then
  cargo build --release -p ztensor-cli
fi

WORK=$(mktemp -d /tmp/ztensor-slurm-e2e.XXXXXX)
NODE=$(hostname -s)
CPUS=$(nproc)
MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
PRIVATE="$WORK/cluster"
mkdir -p "$PRIVATE"/{spool/ctld,spool/d,log,munge}
chmod 700 "$PRIVATE/munge"
export SLURM_CONF="$PRIVATE/slurm.conf"
SOCKET="$PRIVATE/munge/munge.socket"
stop() {
  scancel --quiet --user="$(id -un)" >/dev/null 2>&1 || true
  # Only the daemons this script started, by the process ids they recorded; then, once they
  # are gone, the private directory.
  local pidfile pid pids=()
  for pidfile in "$PRIVATE/slurmd.pid" "$PRIVATE/slurmctld.pid" "$PRIVATE/munge/munged.pid"; do
    if [ -s "$pidfile" ]; then
      pid=$(cat "$pidfile")
      kill "$pid" >/dev/null 2>&1 && pids+=("$pid")
    fi
  done
  for pid in ${pids[@]+"${pids[@]}"}; do
    for _ in $(seq 50); do
      kill -0 "$pid" >/dev/null 2>&1 || break
      sleep 0.1
    done
  done
  rm -rf "$WORK"
  return 0
}
trap stop EXIT

# A one-node cluster: this machine, every core, no cgroups, no accounting, its own munge.
cat > "$SLURM_CONF" <<CONF
ClusterName=ztensor-e2e
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=46817
SlurmdPort=46818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
StateSaveLocation=$PRIVATE/spool/ctld
SlurmdSpoolDir=$PRIVATE/spool/d
SlurmctldPidFile=$PRIVATE/slurmctld.pid
SlurmdPidFile=$PRIVATE/slurmd.pid
SlurmctldLogFile=$PRIVATE/log/slurmctld.log
SlurmdLogFile=$PRIVATE/log/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=e2e Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
dd if=/dev/urandom bs=1 count=1024 of="$PRIVATE/munge/munge.key" 2>/dev/null
chmod 400 "$PRIVATE/munge/munge.key"
/usr/sbin/munged --force --socket="$SOCKET" --key-file="$PRIVATE/munge/munge.key" \
  --pid-file="$PRIVATE/munge/munged.pid" --log-file="$PRIVATE/munge/munged.log" \
  --seed-file="$PRIVATE/munge/munged.seed"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && break
  sleep 1
done
echo "cluster: $(sinfo -h -o '%P %D node(s) %C cpus (A/I/O/T) %T')"

check() { # NAME INPUT [OPTIONS...]: plan, array job, finalize, compare with one process
  local name=$1 input=$2; shift 2
  local out="$WORK/$name-array/" one="$WORK/$name-one/" plan="$WORK/$name-plan.json"
  "$ZTENSOR" plan "$input" "$out" -o "$plan" "$@"
  local n
  n=$(grep -c '"unit":' "$plan")
  local started=$SECONDS
  sbatch --wait --quiet --array=0-$((n - 1)) --cpus-per-task=1 \
    --output="$WORK/$name-unit-%a.log" --wrap "'$ZTENSOR' run '$plan' --threads 1 -q"
  echo "$name: $n units ran as Slurm array tasks in $((SECONDS - started)) s"
  "$ZTENSOR" finalize --deep "$plan"
  "$ZTENSOR" convert -q "$input" "$one" "$@"
  diff -r --exclude=.ztensor-receipts "$one" "$out" >/dev/null
  echo "$name: shards and index byte-identical to one process ($(ls "$one" | wc -l) files)"
  "$ZTENSOR" verify "${out}"*.zt.index.json
}

check safetensors-shards "$ROOT/fixtures/examples/checkpoint/model.safetensors.index.json" --zstd 3 --digest sha256
check by-size "$ROOT/fixtures/v1.2/valid/many-objects.zt" --shard-size 64 --zstd 1 --digest blake3
echo "slurm-e2e: passed"
