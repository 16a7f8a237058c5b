# Shared by the job scripts in jobs/ (sourced, not run). Provides
#   lockstep_train CONFIG LAUNCHER... -- [LOCKSTEP_ARGS...]
# which runs `LAUNCHER... $LOCKSTEP train --config CONFIG --resume auto ARGS...`
# and writes one log per run (into $LOG_DIR, else the run directory) that
# starts with the host, date, git revision, launcher command and the resolved
# config (the TOML file as it is, then the command-line overrides). It
# returns 0 only when the run finished (its last epoch, or an early stop by
# patience): lockstep's rank 0 then writes RUN_DIR/COMPLETE, which is
# removed before the launch. A launcher
# that reports success for a run cut short (mpiexec after SIGTERM) or a
# failure after it finished does not decide.
#   job_arguments, default_option: argument handling of the batch scripts.
#   mpi_launcher N   sets the array `launcher` to a local mpiexec for N ranks,
#                    spelled for MPICH or Open MPI (from `mpiexec --version`).
#   aprun_fit_per_node  holds aprun's -N in the array `launcher` to its -n.
#   slingshot_nccl [DIR...]  NCCL's settings for HPE Slingshot (below).
# Environment: LOCKSTEP (the binary, default ./build/lockstep), LOG_DIR,
# RESUME (default auto; empty: start fresh), DOCTOR (1: run `lockstep doctor`
# with the same launcher and options instead of training, to check each
# rank's CPUs, threads, GPU and data before a long job).
# shellcheck shell=bash

LOCKSTEP=${LOCKSTEP:-./build/lockstep}
RESUME=${RESUME-auto}

die() {
  echo "${0##*/}: $*" >&2
  exit 1
}

# Stops the job, naming the variable, unless each NAME=VALUE argument's value
# is a whole number of at least 1 (ranks, threads or GPUs per node: bash
# arithmetic would read a word as another variable's name, or as 0).
whole_numbers() {
  local pair
  for pair in "$@"; do
    [[ ${pair#*=} =~ ^[1-9][0-9]*$ ]] || die "${pair%%=*}=${pair#*=}: must be a whole number of at least 1"
  done
}

# True when the lockstep arguments after $1 set option $1 (a key such as
# run_dir, given as --run_dir, --run-dir or --run-dir=value).
has_option() {
  local want="--${1//_/-}" arg
  shift
  for arg in "$@"; do
    arg=${arg%%=*}
    [ "${arg//_/-}" = "$want" ] && return 0
  done
  return 1
}

# The value of option $1 in the lockstep arguments after it, else empty.
option_value() {
  local want="--${1//_/-}" name
  shift
  while [ $# -gt 0 ]; do
    name=${1%%=*}
    if [ "${name//_/-}" = "$want" ]; then
      if [ "$name" = "$1" ]; then echo "${2-}"; else echo "${1#*=}"; fi
      return
    fi
    shift
  done
}

# The run directory lockstep will use: --run-dir, else the config's run_dir.
run_dir_of() {
  local config=$1 dir
  shift
  dir=$(option_value run_dir "$@")
  if [ -z "$dir" ] && [ -f "$config" ]; then
    dir=$(sed -n 's/^[[:space:]]*run_dir[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$config")
  fi
  echo "${dir:-runs/default}"
}

# Batch scripts: CONFIG [LOCKSTEP_ARGS...] from the command line (Cobalt,
# Slurm), else from $CONFIG and $LOCKSTEP_ARGS (PBS: qsub -v CONFIG=...,
# LOCKSTEP_ARGS="..."). Sets config and the array extra.
# shellcheck disable=SC2034  # config, extra, launcher are read by the scripts that source this
job_arguments() {
  if [ $# -gt 0 ]; then
    config=$1
    extra=("${@:2}")
  else
    config=${CONFIG:-configs/mnist.toml}
    read -ra extra <<<"${LOCKSTEP_ARGS:-}"
  fi
}

# Adds --KEY VALUE to extra unless the user already gave KEY.
default_option() {
  has_option "$1" "${extra[@]}" || extra=("--${1//_/-}" "$2" "${extra[@]}")
}

# shellcheck disable=SC2034
mpi_launcher() {
  if mpiexec --version 2>&1 | grep -qi 'open mpi'; then
    # Open MPI binds each rank to one core by default and refuses more ranks
    # than cores; lockstep runs its own threads.
    launcher=(mpiexec --bind-to none --oversubscribe -n "$1")
  else
    launcher=(mpiexec -n "$1")  # MPICH (Hydra) and Cray MPICH
  fi
}

# ALPS refuses an aprun with more ranks per node than ranks in all (-N 4
# -n 1), which a launcher template with a fixed -N gives at small rank counts
# (jobs/scale.sh). Holds the -N (--pes-per-node) of the aprun in the array
# `launcher` to its -n (--pes), the first of each after the word aprun;
# other launchers are left as they are.
aprun_fit_per_node() {
  local i aprun=-1 total="" at=-1 prefix="" value
  for i in "${!launcher[@]}"; do
    if [ "$aprun" -lt 0 ]; then
      [ "${launcher[i]##*/}" = aprun ] && aprun=$i
      continue
    fi
    case ${launcher[i]} in
      -n | --pes) [ -n "$total" ] || total=${launcher[i + 1]-} ;;
      --pes=*) [ -n "$total" ] || total=${launcher[i]#*=} ;;
      -N | --pes-per-node) [ "$at" -ge 0 ] || at=$((i + 1)) ;;
      --pes-per-node=*) [ "$at" -ge 0 ] || at=$i prefix=--pes-per-node= ;;
    esac
  done
  [ "$at" -ge 0 ] && [[ $total =~ ^[1-9][0-9]*$ ]] || return 0
  value=${launcher[at]-}
  value=${value#"$prefix"}
  if [[ $value =~ ^[0-9]+$ ]] && [ "$value" -gt "$total" ]; then launcher[at]=$prefix$total; fi
}

# NCCL between nodes on HPE Slingshot (Polaris, Perlmutter) runs at full
# speed only through the aws-ofi-nccl plugin (libnccl-net.so, or
# libnccl-net-SUFFIX.so with NCCL_NET_PLUGIN=SUFFIX set for it); without it
# NCCL falls back to TCP sockets (2-3x slower in ALCF's measurements). Where
# the plugin is found (in $AWS_OFI_NCCL_DIR/lib, each DIR/lib, then the
# folders of LD_LIBRARY_PATH), its folder goes first on LD_LIBRARY_PATH and
# the settings ALCF and HPE publish for it are exported, each only where the
# user has not set it: NCCL_NET="AWS Libfabric" (NCCL then refuses to start
# without the plugin instead of falling back), NCCL_NET_GDR_LEVEL=PHB,
# NCCL_CROSS_NIC=1, FI_CXI_DISABLE_HOST_REGISTER=1,
# FI_MR_CACHE_MONITOR=userfaultfd, FI_CXI_DEFAULT_CQ_SIZE=131072. Returns 0
# then; where no plugin is found it says so in one line, sets nothing and
# returns 1. SLINGSHOT: auto (default: a node with Slingshot interfaces,
# /sys/class/net/hsn*; elsewhere nothing is done or said), 1 (this is
# Slingshot), 0 (nothing at all; ALCF: a few applications hang with the
# plugin).
slingshot_nccl() {
  case "${SLINGSHOT:-auto}" in
    0) return 1 ;;
    1) ;;
    *) compgen -G "/sys/class/net/hsn*" >/dev/null || return 1 ;;
  esac
  local dir lib found="" suffix="" path=() candidates=()
  [ -n "${AWS_OFI_NCCL_DIR:-}" ] && candidates+=("$AWS_OFI_NCCL_DIR/lib")
  for dir in "$@"; do candidates+=("$dir/lib"); done
  IFS=: read -ra path <<<"${LD_LIBRARY_PATH:-}"
  candidates+=("${path[@]}")
  # NCCL loads libnccl-net.so, or libnccl-net-SUFFIX.so when NCCL_NET_PLUGIN
  # names SUFFIX (newer aws-ofi-nccl installs libnccl-net-ofi.so).
  for dir in "${candidates[@]}"; do
    [ -n "$dir" ] || continue
    if [ -e "$dir/libnccl-net.so" ]; then
      found=$dir
      break
    fi
    for lib in "$dir"/libnccl-net-*.so; do
      if [ -e "$lib" ]; then
        found=$dir suffix=${lib##*/libnccl-net-}
        suffix=${suffix%.so}
        break 2
      fi
    done
  done
  if [ -z "$found" ]; then
    echo "${0##*/}: no aws-ofi-nccl plugin (libnccl-net*.so) in AWS_OFI_NCCL_DIR, ${*:-}" \
      "or LD_LIBRARY_PATH: NCCL between nodes takes TCP sockets (SLINGSHOT=0: no check)" >&2
    return 1
  fi
  export LD_LIBRARY_PATH="$found${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [ -n "$suffix" ]; then export NCCL_NET_PLUGIN="${NCCL_NET_PLUGIN-$suffix}"; fi
  export NCCL_NET="${NCCL_NET-AWS Libfabric}" NCCL_NET_GDR_LEVEL="${NCCL_NET_GDR_LEVEL-PHB}"
  export NCCL_CROSS_NIC="${NCCL_CROSS_NIC-1}"
  export FI_CXI_DISABLE_HOST_REGISTER="${FI_CXI_DISABLE_HOST_REGISTER-1}"
  export FI_MR_CACHE_MONITOR="${FI_MR_CACHE_MONITOR-userfaultfd}"
  export FI_CXI_DEFAULT_CQ_SIZE="${FI_CXI_DEFAULT_CQ_SIZE-131072}"
  echo "${0##*/}: NCCL over Slingshot through $found" >&2
}

lockstep_train() {
  local config=$1 run_dir log job revision
  local -a launch=() args=()
  shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do launch+=("$1") && shift; done
  [ $# -gt 0 ] && shift
  [ -f "$config" ] || die "config file $config not found (run from the repository root)"
  [ -x "$LOCKSTEP" ] || die "lockstep binary $LOCKSTEP not found: build it (scripts/build.sh) or set LOCKSTEP"
  if [ "${DOCTOR:-0}" = 1 ]; then
    "${launch[@]}" "$LOCKSTEP" doctor --config "$config" "$@"
    return
  fi
  args=(train --config "$config")
  if [ -n "$RESUME" ] && ! has_option resume "$@"; then args+=(--resume "$RESUME"); fi
  args+=("$@")

  run_dir=$(run_dir_of "$config" "$@")
  job=${COBALT_JOBID:-${PBS_JOBID:-${SLURM_JOB_ID:-$$}}}
  mkdir -p "${LOG_DIR:-$run_dir}"
  log=${LOG_DIR:-$run_dir}/lockstep-$(date +%Y%m%d-%H%M%S)-${job%%.*}.log
  revision=$(git -C "$(dirname "${BASH_SOURCE[0]}")" describe --always --dirty 2>/dev/null || echo unknown)
  {
    echo "host     : $(hostname)"
    echo "date     : $(date -Is)"
    echo "git      : $revision"
    echo "job      : $job"
    echo "command  : $(printf '%q ' "${launch[@]}" "$LOCKSTEP" "${args[@]}")"
    echo "config   : $config"
    echo "----- $config"
    cat "$config"
    echo "----- overrides: $(printf '%q ' "$@")"
    echo "-----"
  } >"$log"
  echo "log: $log" >&2
  rm -f "$run_dir/COMPLETE"
  set -o pipefail
  local status=0
  { "${launch[@]}" "$LOCKSTEP" "${args[@]}" 2>&1 | tee -a "$log"; status=${PIPESTATUS[0]}; } || true
  if [ -f "$run_dir/COMPLETE" ]; then
    echo "job: $(cat "$run_dir/COMPLETE") (launcher exit status $status)" | tee -a "$log" >&2
    return 0
  fi
  echo "${0##*/}: the run in $run_dir did not reach its last epoch (launcher exit status" \
    "$status); resubmit to continue from its newest checkpoint" | tee -a "$log" >&2
  [ "$status" -ne 0 ] || status=1
  return "$status"
}
