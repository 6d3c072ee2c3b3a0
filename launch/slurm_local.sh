#!/usr/bin/env bash
# A one-machine SLURM cluster on localhost, to try the sweep's slurm executor (and for its test).
#
# Usage (as root, Debian/Ubuntu):
#   bash launch/slurm_local.sh start    # install slurm-wlm + munge if missing, configure, start daemons
#   bash launch/slurm_local.sh status   # sinfo
#   bash launch/slurm_local.sh stop     # stop slurmctld, slurmd and munged
#
# Writes /etc/slurm/slurm.conf (refuses to replace one it did not write): one node named after this
# host with its CPU count (nproc) and memory (free -m), one partition "debug", no cgroups
# (ProctrackType=proctrack/linuxproc, TaskPlugin=task/none), no accounting. State and logs live in
# /var/lib/attention_jax_slurm. Afterwards `sbatch`, `squeue` and `srun` work for root on this machine.
set -euo pipefail

STATE_DIR=/var/lib/attention_jax_slurm
CONF=/etc/slurm/slurm.conf
MARKER="# Written by attention_jax launch/slurm_local.sh"

die() { echo "slurm_local.sh: $*" >&2; exit 1; }

require_root() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts daemons as root)."
}

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    return
  fi
  command -v apt-get >/dev/null || die "slurm is not installed and apt-get is missing: install slurm-wlm and munge by hand."
  echo "Installing slurm-wlm and munge (apt-get)..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >"$STATE_DIR/apt.log" 2>&1 || die "apt-get update failed; see $STATE_DIR/apt.log"
  apt-get install -y -q slurm-wlm munge >>"$STATE_DIR/apt.log" 2>&1 \
    || die "apt-get install slurm-wlm munge failed; see $STATE_DIR/apt.log"
}

write_config() {
  if [[ -f $CONF ]] && ! grep -q "^$MARKER" "$CONF"; then
    die "$CONF exists and was not written by this script; not replacing it."
  fi
  local host cpus memory_mb
  host=$(hostname -s)
  cpus=$(nproc)
  memory_mb=$(free -m | awk '/^Mem:/ {print int($2 * 0.9)}')
  mkdir -p /etc/slurm "$STATE_DIR/ctld" "$STATE_DIR/d" "$STATE_DIR/log"
  cat >"$CONF" <<EOF
$MARKER
ClusterName=localcluster
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/d
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmdPidFile=$STATE_DIR/slurmd.pid
SlurmctldLogFile=$STATE_DIR/log/slurmctld.log
SlurmdLogFile=$STATE_DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
MinJobAge=3600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

# Whether a process runs (a zombie left by a stopped daemon does not count).
running() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ -n $state && $state != Z* ]]
}

# Whether the process named in a pid file runs.
alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  running "$pid"
}

start_munge() {
  if munge -n </dev/null >/dev/null 2>&1; then return; fi
  [[ -f /etc/munge/munge.key ]] || /usr/sbin/mungekey --create >/dev/null 2>&1 \
    || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged || die "munged failed to start; see /var/log/munge/munged.log"
}

wait_for_node() {
  for _ in $(seq 60); do
    if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then return; fi
    sleep 1
  done
  die "the node did not come up within 60 s; see $STATE_DIR/log/slurmctld.log and slurmd.log"
}

start() {
  require_root
  mkdir -p "$STATE_DIR"
  install_packages
  write_config
  start_munge
  alive "$STATE_DIR/slurmctld.pid" || slurmctld || die "slurmctld failed; see $STATE_DIR/log/slurmctld.log"
  alive "$STATE_DIR/slurmd.pid" || slurmd || die "slurmd failed; see $STATE_DIR/log/slurmd.log"
  wait_for_node
  scontrol update NodeName="$(hostname -s)" State=RESUME >/dev/null 2>&1 || true
  echo "SLURM is up on $(hostname -s): $(sinfo -h -o '%P %D nodes, %c CPUs, %t')"
}

# Send SIGTERM to the daemon in a pid file and wait (up to 30 s) until it has exited.
stop_pidfile() {
  local pidfile=$1 pid
  alive "$pidfile" || { rm -f "$pidfile"; return 0; }
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 60); do
    running "$pid" || break
    sleep 0.5
  done
  if running "$pid"; then echo "slurm_local.sh: $pid ($pidfile) still running after 30 s" >&2; fi
  rm -f "$pidfile"
}

stop() {
  require_root
  stop_pidfile "$STATE_DIR/slurmd.pid"
  stop_pidfile "$STATE_DIR/slurmctld.pid"
  stop_pidfile /run/munge/munged.pid
  echo "SLURM daemons stopped."
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) sinfo ;;
  *) die "usage: $0 start|stop|status" ;;
esac
