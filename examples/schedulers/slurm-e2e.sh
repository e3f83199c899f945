#!/usr/bin/env bash
# End to end on a real scheduler: installs Debian's slurm-wlm (if needed), starts a one-node
# Slurm cluster on this machine (munged, slurmctld, slurmd), plans two sharded conversions,
# runs every unit as a Slurm array job, finalizes, and compares the shards and index byte for
# byte with what one `ztensor convert IN OUTDIR/` writes. Needs root (apt-get, the daemons).
# Not part of the default test command: it installs packages and takes a minute or two.
#
#   bash examples/schedulers/slurm-e2e.sh            # uses target/release/ztensor (built if missing)
#   ZTENSOR=/path/to/ztensor bash examples/schedulers/slurm-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)

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
  cargo build -q --release -p ztensor-cli
fi

WORK=$(mktemp -d /tmp/ztensor-slurm-e2e.XXXXXX)
NODE=$(hostname -s)
CPUS=$(nproc)
MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
CONF=/etc/slurm/slurm.conf
stop() {
  scancel --quiet --user=root >/dev/null 2>&1 || true
  pkill -x slurmd >/dev/null 2>&1 || true
  pkill -x slurmctld >/dev/null 2>&1 || true
  pkill -x munged >/dev/null 2>&1 || true
  [ -f "$CONF.ztensor-e2e-backup" ] && mv "$CONF.ztensor-e2e-backup" "$CONF"
  [ -f "$CONF.ztensor-e2e-new" ] && rm -f "$CONF" "$CONF.ztensor-e2e-new"
  return 0
}
trap stop EXIT

# A one-node cluster: this machine, every core, no cgroups, no accounting.
if [ -f "$CONF" ]; then cp "$CONF" "$CONF.ztensor-e2e-backup"; else touch "$CONF.ztensor-e2e-new"; fi
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
cat > "$CONF" <<CONF
ClusterName=ztensor-e2e
SlurmctldHost=$NODE(127.0.0.1)
AuthType=auth/munge
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=e2e Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 400 /etc/munge/munge.key
runuser -u munge -- /usr/sbin/munged --force
slurmctld
slurmd
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
rm -rf "$WORK"
