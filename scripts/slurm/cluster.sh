#!/usr/bin/env bash
# A single-node SLURM cluster on localhost, for tests and trying the sbatch template (run as root).
#
#   scripts/slurm/cluster.sh install   # apt-get install slurm-wlm munge (Debian/Ubuntu), once
#   scripts/slurm/cluster.sh start     # munged + slurmctld + slurmd, JobRequeue=1, prints `export SLURM_CONF=...`
#   scripts/slurm/cluster.sh stop      # stops the three daemons it started
#
# Everything lives in $GRAPHCTX_SLURM_DIR (default /tmp/graphctx-slurm): the generated slurm.conf, state,
# spool, logs and pid files. Clients find the cluster through SLURM_CONF=$GRAPHCTX_SLURM_DIR/slurm.conf.
# No cgroups are needed: processes are tracked by parent pid (proctrack/linuxproc), tasks are not bound.
set -euo pipefail

DIR="${GRAPHCTX_SLURM_DIR:-/tmp/graphctx-slurm}"
CONF="$DIR/slurm.conf"
CPUS="${GRAPHCTX_SLURM_CPUS:-2}"
MUNGE_SOCKET="$DIR/munge/munge.socket"

install_packages() {
  if command -v slurmctld >/dev/null && command -v munged >/dev/null; then
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends slurm-wlm munge
}

write_conf() {
  mkdir -p "$DIR"/{state,spool,munge}
  cat > "$CONF" <<CONF
ClusterName=graphctx
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${GRAPHCTX_SLURMCTLD_PORT:-6817}
SlurmdPort=${GRAPHCTX_SLURMD_PORT:-6818}
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobRequeue=1
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerParameters=sched_interval=1
MessageTimeout=30
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
}

wait_for_idle() {
  for _ in $(seq 60); do
    state="$(SLURM_CONF="$CONF" sinfo -h -n localhost -o %T 2>/dev/null || true)"
    case "$state" in
      idle*|mixed*|allocated*) return 0 ;;
      down*|drain*) SLURM_CONF="$CONF" scontrol update nodename=localhost state=resume 2>/dev/null || true ;;
    esac
    sleep 1
  done
  echo "cluster.sh: node did not become idle (state: ${state:-none}); see $DIR/*.log" >&2
  return 1
}

start() {
  stop_daemons quiet
  write_conf
  chown root:root "$DIR/munge" && chmod 0700 "$DIR/munge"
  munged --force --socket="$MUNGE_SOCKET" --pid-file="$DIR/munged.pid" \
    --log-file="$DIR/munged.log" --seed-file="$DIR/munge/munge.seed"
  slurmctld -f "$CONF" -i   # -i: ignore state left by an earlier cluster in $DIR
  slurmd -f "$CONF" -N localhost
  wait_for_idle
  echo "export SLURM_CONF=$CONF"
}

stop_daemons() {
  for name in slurmd slurmctld munged; do
    pidfile="$DIR/$name.pid"
    if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      pid="$(cat "$pidfile")"
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$pidfile"
  done
  [[ "${1:-}" == quiet ]] || echo "cluster.sh: stopped"
}

case "${1:-}" in
  install) install_packages ;;
  start) start ;;
  stop) stop_daemons ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
