#!/usr/bin/env bash
# A real single-node Slurm cluster on this host, for tests and for trying hydra/launcher=slurm:
#   scripts/slurm-local.sh start    # installs what is missing; starts munged, mariadbd, slurmdbd, slurmctld, slurmd
#   eval "$(scripts/slurm-local.sh env)"; sinfo; python -m searchbox.sweep -m hydra/launcher=slurm ...
#   scripts/slurm-local.sh status
#   scripts/slurm-local.sh stop     # cancels its jobs, stops the daemons it started, nothing else
# Everything lives in $SEARCHBOX_SLURM_DIR (default /var/tmp/searchbox-slurm): its own slurm.conf, munge key and
# socket, database, state, spool and logs, so it neither reads nor changes /etc/slurm, /etc/munge or a munged or
# database already running here. Clients find it through SLURM_CONF (`env` prints it). Needs root.
# Accounting (slurmdbd over a private MariaDB) is part of it because submitit learns how a job ended from `sacct`:
# without it a cancelled or timed-out job looks pending forever and the sweep waits on it.
# Ports: $SEARCHBOX_SLURM_PORT (default 6817) for slurmctld, +1 slurmd, +2 slurmdbd, +3 MariaDB (127.0.0.1).
# Exit codes: 0 ok, 2 cannot run here (the reason on stderr), 1 failed to start (the daemons' log tails on stderr).
set -euo pipefail

DIR=${SEARCHBOX_SLURM_DIR:-/var/tmp/searchbox-slurm}
PORT=${SEARCHBOX_SLURM_PORT:-6817}
CONF=$DIR/slurm.conf
MUNGE_SOCKET=$DIR/munge/munge.socket
DB_SOCKET=$DIR/db/mariadb.sock
DB_PASS=searchbox-local  # the database listens on 127.0.0.1 only and holds nothing but this cluster's job records
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)
export SLURM_CONF=$CONF

say() { printf '[slurm-local] %s\n' "$*" >&2; }
cannot() { say "cannot run here: $*"; exit 2; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
logs() { for f in "$@"; do [ -f "$DIR/log/$f" ] && { echo "--- $f"; tail -n 5 "$DIR/log/$f"; }; done >&2; true; }

install_missing() {
  local missing=() pair
  for pair in slurmctld:slurm-wlm slurmd:slurm-wlm sinfo:slurm-wlm slurmdbd:slurmdbd munged:munge mariadbd:mariadb-server; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 || cannot "${missing[*]} not installed, and no apt-get to install them"
  say "apt-get install ${PACKAGES[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null; } \
    || cannot "apt-get install ${PACKAGES[*]} failed"
}

wait_for() {  # wait_for SECONDS what command...: until the command succeeds
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  while [ $SECONDS -lt $deadline ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  say "$what did not come up in ${secs}s"; return 1
}

write_confs() {
  local host=$1 cpus mem_mb
  cpus=$(nproc)
  # The node's memory less 1 GiB for the daemons; with CR_CPU memory is not consumed, only an upper bound for --mem.
  mem_mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
  cat > "$CONF" <<EOF
# Written by scripts/slurm-local.sh: a one-node cluster on $host.
ClusterName=searchbox
SlurmctldHost=$host
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire is also how long a requeued job waits before it may start again (default 120 s).
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=10
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# No cgroups: processes tracked by parentage, CPUs bound by affinity (a job's mask is its allocation).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MpiDefault=none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$host
AccountingStoragePort=$((PORT + 2))
AccountingStoragePass=$MUNGE_SOCKET
JobAcctGatherType=jobacct_gather/none
# As strict as a site may be: a job is requeued only if it asked to be (sbatch --requeue, as conf/hydra/launcher/slurm.yaml does).
JobRequeue=0
ReturnToService=2
SlurmdParameters=config_overrides
# Short waits, so a test's requeue or cancel takes seconds rather than minutes.
KillWait=5
MinJobAge=300
InactiveLimit=0
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  cat > "$DIR/slurmdbd.conf" <<EOF
DbdHost=$host
DbdPort=$((PORT + 2))
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$((PORT + 3))
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
EOF
  chmod 600 "$DIR/slurmdbd.conf"  # slurmdbd refuses a config others may read (it holds the password)
}

start_database() {
  mariadb-install-db --user=root --datadir="$DIR/db/data" --auth-root-authentication-method=socket --skip-test-db \
    >"$DIR/log/mariadb-install.log" 2>&1 || { logs mariadb-install.log; return 1; }
  # Small buffers: it holds a few rows per job.
  setsid mariadbd --no-defaults --user=root --datadir="$DIR/db/data" --socket="$DB_SOCKET" --port=$((PORT + 3)) \
    --bind-address=127.0.0.1 --pid-file="$DIR/mariadb.pid" --log-error="$DIR/log/mariadb.log" --skip-log-bin \
    --innodb-buffer-pool-size=32M --innodb-log-file-size=16M --performance-schema=OFF </dev/null >/dev/null 2>&1 &
  wait_for 60 MariaDB mariadb --no-defaults -S "$DB_SOCKET" -e 'select 1' || { logs mariadb.log; return 1; }
  mariadb --no-defaults -S "$DB_SOCKET" -e "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
}

start() {
  [ "$(id -u)" -eq 0 ] || cannot "not root (the Slurm daemons and munged run as root)"
  if alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd.pid"; then
    say "already running ($CONF)"; wait_idle; return 0
  fi
  install_missing
  local host port
  host=$(hostname -s)
  getent hosts "$host" >/dev/null || cannot "this host's name ($host) does not resolve; slurmctld needs it to"
  for port in "$PORT" $((PORT + 1)) $((PORT + 2)) $((PORT + 3)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      cannot "port $port is taken (another Slurm here?); set SEARCHBOX_SLURM_PORT to a free range of four"
    fi
  done
  stop_daemons  # leftovers of an earlier start that was not stopped (pid files in this directory only)
  rm -rf "$DIR"
  mkdir -p "$DIR"/{state,spool,log,munge,db}
  chmod 700 "$DIR/munge"
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$DIR/munge/munge.key"
  write_confs "$host"
  # --force: munged otherwise refuses to run as root.
  munged </dev/null >/dev/null 2>&1 --force --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCKET" --pid-file="$DIR/munged.pid" \
    --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" || { logs munged.log; exit 1; }
  start_database || { stop_daemons; exit 1; }
  # slurmdbd reads slurmdbd.conf beside $SLURM_CONF.
  slurmdbd </dev/null >>"$DIR/log/slurmdbd.log" 2>&1 || { logs slurmdbd.log; stop_daemons; exit 1; }
  wait_for 60 slurmdbd sacctmgr -n list cluster || { logs slurmdbd.log; stop_daemons; exit 1; }
  sacctmgr -i -Q add cluster searchbox >/dev/null
  slurmctld -f "$CONF" </dev/null >/dev/null 2>&1 || { logs slurmctld.log; stop_daemons; exit 1; }
  slurmd -f "$CONF" </dev/null >/dev/null 2>&1 || { logs slurmd.log; stop_daemons; exit 1; }
  wait_idle
}

wait_idle() {
  local state=""
  for _ in $(seq 1 120); do
    state=$(sinfo -h -N -o '%t' 2>/dev/null | head -1 || true)
    case "$state" in
      idle|mix|alloc) say "up: node $(hostname -s) $state; export SLURM_CONF=$CONF"; return 0 ;;
    esac
    sleep 0.5
  done
  say "the node did not come up idle (state '${state:-no answer}')"
  logs slurmctld.log slurmd.log slurmdbd.log
  stop
  exit 1
}

stop_daemon() {  # the pid in a pid file this script's start wrote: SIGTERM, then SIGKILL after 10 s
  local pidfile=$1 pid
  alive "$pidfile" || { rm -f "$pidfile"; return 0; }
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -f "$pidfile"
}

stop_daemons() {
  local name
  for name in slurmd slurmctld slurmdbd mariadb munged; do stop_daemon "$DIR/$name.pid"; done
}

stop() {
  [ -f "$CONF" ] || { say "not running (no $CONF)"; return 0; }
  if alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd.pid"; then
    # Jobs first, while slurmd can still end their steps (all jobs of this private slurmctld are ours).
    local jobs
    jobs=$(squeue -h -o %A 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086
      scancel --full $jobs 2>/dev/null || true
      for _ in $(seq 1 60); do [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.5; done
    fi
  fi
  stop_daemons
  say "stopped"
}

status() {
  local name down=()
  for name in munged mariadb slurmdbd slurmctld slurmd; do alive "$DIR/$name.pid" || down+=("$name"); done
  if [ ${#down[@]} -gt 0 ]; then say "not running: ${down[*]}"; return 3; fi
  sinfo -N
  squeue
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 64 ;;
esac
