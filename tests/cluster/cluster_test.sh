#!/usr/bin/env bash
# Multi-node tests on a cluster made of network namespaces on this machine
# (scripts/fake_cluster.sh): ranks on different "nodes" talk over TCP.
#
#   tests/cluster/cluster_test.sh CASE BUILD_DIR
#
# CASE: exit | topology | same_numbers | crash | freeze | evaluate |
# partition | slow_link | sigterm | stall_partition | scale | reproducible. Each case makes its own cluster (prefix "c" + case)
# and tears it down, also on failure. Where namespaces cannot be made (not
# root, no iproute2) a case skips (exit 77) saying why, except under CI=true,
# where it fails: CI runs as root and must run them.
set -euo pipefail

case_name=${1:?usage: cluster_test.sh CASE BUILD_DIR}
build=$(cd "${2:?usage: cluster_test.sh CASE BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
fc="$src/scripts/fake_cluster.sh"
lockstep="$build/lockstep"
prefix="c${case_name:0:6}"
prefix=${prefix//_/}
work=$(mktemp -d "/tmp/lockstep-cluster-$case_name.XXXXXX")

fail() {
  echo "FAIL [$case_name]: $*" >&2
  exit 1
}

if ! reason=$(bash "$fc" check); then
  [ "${CI:-}" = true ] && fail "the fake cluster must run in CI: $reason"
  echo "SKIP [$case_name]: $reason"
  exit 77
fi

cleanup() {
  bash "$fc" down -p "$prefix" || true
  rm -rf "$work"
}
trap cleanup EXIT

# A short Fashion-MNIST run; "$@" adds or overrides flags.
train_args() {
  echo train --config "$src/configs/fashion_mnist.toml" --threads 1 --progress plain \
    --test-subset 500 "$@"
}

# cluster_mpiexec NODES RANKS_PER_NODE CMD...: on the cluster made by `up`;
# a run that outlasts 300 s counts as a hang.
cluster_mpiexec() {
  local nodes=$1 ranks=$2
  shift 2
  timeout 300 bash "$fc" mpiexec -p "$prefix" -n "$nodes" -r "$ranks" -- "$@"
}

# Processes left on any node of the cluster (by command name).
leftovers() {
  local node
  for node in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-node" | sed "s/^$prefix-//"); do
    bash "$fc" pids -p "$prefix" "$node" | xargs -r ps -o comm= -p | sed "s/^/$node: /" || true
  done
}

# Waits (polling, up to $2 s) until no process is left on any node.
expect_no_leftovers() {
  local what=$1 limit=$2 start=$SECONDS
  while [ -n "$(leftovers)" ]; do
    [ $((SECONDS - start)) -lt "$limit" ] || fail "$what: processes left: $(leftovers | tr '\n' ' ')"
    sleep 0.5
  done
}

# Waits until FILE holds a line matching PATTERN while PID lives.
wait_for_line() {
  local file=$1 pattern=$2 pid=$3
  until grep -qE "$pattern" "$file" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || fail "the job ended before '$pattern': $(tail -n 5 "$file")"
    sleep 0.1
  done
}

final_weights() { sha256sum "$1/model.safetensors" | cut -d' ' -f1; }

case_exit() {
  # Training and doctor across two nodes exit by themselves, 20 of 20 times
  # (MPI_Finalize over TCP used to hang in about a quarter of the runs).
  bash "$fc" up -p "$prefix" -n 2
  local i rc
  for i in $(seq 1 20); do
    rc=0
    cluster_mpiexec 2 2 "$lockstep" doctor --config "$src/configs/fashion_mnist.toml" \
      >"$work/doctor.txt" 2>&1 || rc=$?
    [ $rc -eq 0 ] || fail "doctor run $i of 20 exited $rc: $(tail -n 3 "$work/doctor.txt")"
    grep -q "4 ranks on 2 nodes" "$work/doctor.txt" || fail "doctor run $i: $(head -n 1 "$work/doctor.txt")"
    rc=0
    # shellcheck disable=SC2046
    cluster_mpiexec 2 2 "$lockstep" $(train_args --epochs 1 --train-subset 1024 \
      --run-dir "$work/run$i") >"$work/train.txt" 2>&1 || rc=$?
    [ $rc -eq 0 ] || fail "train run $i of 20 exited $rc: $(tail -n 3 "$work/train.txt")"
    [ -f "$work/run$i/COMPLETE" ] || fail "train run $i: no COMPLETE"
  done
  expect_no_leftovers "after 40 runs" 10
  echo "exit: 20 doctor and 20 training runs across 2 nodes exited 0"
}

# Checks doctor's rank table: "RANK HOST LOCAL/SIZE" per line.
expect_rows() {
  local file=$1
  shift
  local row rank host slot
  for row in "$@"; do
    read -r rank host slot <<<"$row"
    grep -qE "^$rank +$host +$slot " "$file" || fail "doctor has no row '$row': $(cat "$file")"
  done
}

case_topology() {
  bash "$fc" up -p "$prefix" -n 3
  cluster_mpiexec 2 2 "$lockstep" doctor --config "$src/configs/fashion_mnist.toml" >"$work/2x2.txt" 2>&1 ||
    fail "doctor 2x2: $(cat "$work/2x2.txt")"
  grep -q "4 ranks on 2 nodes" "$work/2x2.txt" || fail "2x2: $(head -n 1 "$work/2x2.txt")"
  expect_rows "$work/2x2.txt" "0 node0 0/2" "1 node0 1/2" "2 node1 0/2" "3 node1 1/2"
  cluster_mpiexec 3 1 "$lockstep" doctor --config "$src/configs/fashion_mnist.toml" >"$work/3x1.txt" 2>&1 ||
    fail "doctor 3x1: $(cat "$work/3x1.txt")"
  grep -q "3 ranks on 3 nodes" "$work/3x1.txt" || fail "3x1: $(head -n 1 "$work/3x1.txt")"
  expect_rows "$work/3x1.txt" "0 node0 0/1" "1 node1 0/1" "2 node2 0/1"
  # The start-up line and fingerprint check of a real run across 3 nodes.
  # shellcheck disable=SC2046
  cluster_mpiexec 3 1 "$lockstep" $(train_args --epochs 1 --train-subset 768 --run-dir "$work/run") \
    >"$work/train.txt" 2>&1 || fail "train 3x1: $(tail -n 3 "$work/train.txt")"
  grep -q "3 ranks on 3 nodes" "$work/train.txt" || fail "start-up line: $(head -n 1 "$work/train.txt")"
  # GPU binding of jobs/gpu_affinity.sh with 4 GPUs on node0 and 2 on node1
  # (a stand-in nvidia-smi answers per host name).
  mkdir -p "$work/bin"
  cat >"$work/bin/nvidia-smi" <<'EOF'
#!/bin/sh
var="FAKE_GPUS_$(hostname)"
eval "n=\${$var:-0}"
i=0
while [ "$i" -lt "$n" ]; do echo "GPU $i: Fake GPU (UUID: GPU-$i)"; i=$((i + 1)); done
EOF
  chmod +x "$work/bin/nvidia-smi"
  # shellcheck disable=SC2016 # expanded by each rank's shell
  PATH="$work/bin:$PATH" FAKE_GPUS_node0=4 FAKE_GPUS_node1=2 cluster_mpiexec 2 2 \
    bash "$src/jobs/gpu_affinity.sh" sh -c 'echo "bind $(hostname) $MPI_LOCALRANKID $CUDA_VISIBLE_DEVICES"' \
    >"$work/gpus.txt" 2>&1 || fail "gpu_affinity.sh: $(cat "$work/gpus.txt")"
  local expected
  for expected in "node0 0 3" "node0 1 2" "node1 0 1" "node1 1 0"; do
    grep -qx "bind $expected" "$work/gpus.txt" || fail "no 'bind $expected' in: $(cat "$work/gpus.txt")"
  done
  expect_no_leftovers "after the topology runs" 10
  echo "topology: 2x2 and 3x1 local ranks, doctor, start-up line and GPU binding per node"
}

case_same_numbers() {
  # The same 4 ranks on two nodes and on one: the same bits (MPICH picks the
  # same reduction order for both; the test says so if that ever changes).
  bash "$fc" up -p "$prefix" -n 2
  # shellcheck disable=SC2046
  cluster_mpiexec 2 2 "$lockstep" $(train_args --epochs 2 --train-subset 2048 --run-dir "$work/two") \
    >"$work/two.txt" 2>&1 || fail "2 nodes: $(tail -n 3 "$work/two.txt")"
  # shellcheck disable=SC2046
  cluster_mpiexec 1 4 "$lockstep" $(train_args --epochs 2 --train-subset 2048 --run-dir "$work/one") \
    >"$work/one.txt" 2>&1 || fail "1 node: $(tail -n 3 "$work/one.txt")"
  grep -q "4 ranks on 2 nodes" "$work/two.txt" || fail "not on 2 nodes: $(head -n 1 "$work/two.txt")"
  grep -q "4 ranks on 1 node" "$work/one.txt" || fail "not on 1 node: $(head -n 1 "$work/one.txt")"
  [ "$(final_weights "$work/two")" = "$(final_weights "$work/one")" ] ||
    fail "final weights differ between 2 nodes x 2 ranks and 1 node x 4 ranks"
  # Losses and accuracies (columns 1-8 of metrics.csv; from 9 on: times).
  [ "$(cut -d, -f1-8 "$work/two/metrics.csv")" = "$(cut -d, -f1-8 "$work/one/metrics.csv")" ] ||
    fail "metrics differ: $(diff <(cut -d, -f1-8 "$work/two/metrics.csv") <(cut -d, -f1-8 "$work/one/metrics.csv"))"
  echo "same_numbers: 2 nodes x 2 ranks = 1 node x 4 ranks, bit for bit (weights and metrics)"
}

# A run of 4 epochs that a fault interrupts after its first, then resumed:
# it must end with the bits of an uninterrupted run.
fault_args() {
  train_args --epochs 4 --train-subset 8192 --stall-abort-s 600 "$@"
}

baseline() {
  # shellcheck disable=SC2046
  cluster_mpiexec 2 2 "$lockstep" $(fault_args --run-dir "$work/baseline") >"$work/baseline.txt" 2>&1 ||
    fail "uninterrupted run: $(tail -n 3 "$work/baseline.txt")"
}

# start_faulted_run: launches in the background; sets job_pid.
start_faulted_run() {
  # shellcheck disable=SC2046
  cluster_mpiexec 2 2 "$lockstep" $(fault_args --run-dir "$work/faulted") >"$work/faulted.txt" 2>&1 &
  job_pid=$!
  wait_for_line "$work/faulted.txt" "^epoch +1/4" "$job_pid"
  fault_start=$(date +%s.%N)
}

# finish_faulted_run WHAT EXPECTED_PATTERN: the job ended non-zero with a
# line matching the pattern; prints the time from fault to the end.
finish_faulted_run() {
  local what=$1 pattern=$2 rc=0
  wait "$job_pid" || rc=$?
  local seconds
  seconds=$(awk -v a="$fault_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  echo "$rc" >"$work/exit_code"
  [ $rc -ne 0 ] || fail "$what: the job exited 0: $(tail -n 3 "$work/faulted.txt")"
  [ $rc -ne 124 ] || fail "$what: the job did not end (killed by the test's 300 s limit)"
  [ ! -f "$work/faulted/COMPLETE" ] || fail "$what: the run finished before the fault"
  grep -qE "$pattern" "$work/faulted.txt" || fail "$what: no line '$pattern' in: $(tail -n 5 "$work/faulted.txt")"
  echo "$what: the job ended (exit $rc) $seconds s after the fault"
}

resume_and_compare() {
  local what=$1
  # shellcheck disable=SC2046
  cluster_mpiexec 2 2 "$lockstep" $(fault_args --run-dir "$work/faulted" --resume auto) \
    >"$work/resumed.txt" 2>&1 || fail "$what: resume: $(tail -n 3 "$work/resumed.txt")"
  [ "$(final_weights "$work/faulted")" = "$(final_weights "$work/baseline")" ] ||
    fail "$what: the resumed run's weights differ from the uninterrupted run's"
  echo "$what: --resume auto finished with the uninterrupted run's weights"
}

case_crash() {
  bash "$fc" up -p "$prefix" -n 2
  baseline
  start_faulted_run
  bash "$fc" crash -p "$prefix" node1
  finish_faulted_run crash "."
  expect_no_leftovers crash 30
  resume_and_compare crash
}

case_freeze() {
  bash "$fc" up -p "$prefix" -n 2
  baseline
  start_faulted_run
  bash "$fc" freeze -p "$prefix" node1
  finish_faulted_run freeze "rank 0 \(node0\): lost node node1 \(ranks 2, 3\): silent for"
  # Node0 is clear; node1's stopped processes end by themselves once thawed.
  [ -z "$(bash "$fc" pids -p "$prefix" node0)" ] || fail "freeze: processes left on node0"
  bash "$fc" thaw -p "$prefix" node1
  expect_no_leftovers "freeze (after thawing node1)" 30
  resume_and_compare freeze
}

# Waits until both lockstep ranks on NODE run their liveness thread (named
# ls-liveness: their heartbeat connections are made) while PID lives.
wait_for_liveness() {
  local node=$1 pid=$2 running p
  while :; do
    kill -0 "$pid" 2>/dev/null || fail "the job ended before $node's liveness threads ran: $(tail -n 3 "$work/faulted.txt")"
    running=0
    for p in $(bash "$fc" pids -p "$prefix" "$node"); do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = lockstep ] || continue
      if grep -qx ls-liveness /proc/"$p"/task/*/comm 2>/dev/null; then running=$((running + 1)); fi
    done
    [ "$running" -lt 2 ] || return 0
    sleep 0.1
  done
}

case_evaluate() {
  # lockstep evaluate across nodes has the heartbeat too: a node that
  # freezes during an evaluation ends the job, named, instead of leaving
  # the other ranks waiting in its collectives.
  bash "$fc" up -p "$prefix" -n 2
  # A resnet20 checkpoint (one rank, one short epoch), whose evaluation of
  # the 10,000 test images lasts seconds on 4 ranks.
  # shellcheck disable=SC2046
  cluster_mpiexec 1 1 "$lockstep" $(train_args --model resnet20 --epochs 1 --train-subset 128 \
    --run-dir "$work/ckpt") >"$work/ckpt.txt" 2>&1 || fail "checkpoint run: $(tail -n 3 "$work/ckpt.txt")"
  local checkpoint
  checkpoint=$(find "$work/ckpt" -name 'checkpoint-*.lsck' | head -n 1)
  [ -n "$checkpoint" ] || fail "the checkpoint run wrote no checkpoint"
  cluster_mpiexec 2 2 "$lockstep" evaluate --checkpoint "$checkpoint" --test-subset 0 --threads 1 \
    >"$work/faulted.txt" 2>&1 &
  job_pid=$!
  # Node1's ranks are connected to rank 0's monitor; once frozen, the
  # evaluation's collectives cannot finish without them.
  wait_for_liveness node1 "$job_pid"
  fault_start=$(date +%s.%N)
  bash "$fc" freeze -p "$prefix" node1
  finish_faulted_run evaluate "rank 0 \(node0\): lost node node1 \(ranks 2, 3\): silent for"
  # Node0's ranks end with the job (polled: the launcher may return while
  # they are still on their way out); node1's once thawed.
  local start=$SECONDS
  while [ -n "$(bash "$fc" pids -p "$prefix" node0)" ]; do
    [ $((SECONDS - start)) -lt 10 ] ||
      fail "evaluate: processes left on node0: $(bash "$fc" pids -p "$prefix" node0 | xargs -r ps -o comm= -p)"
    sleep 0.2
  done
  bash "$fc" thaw -p "$prefix" node1
  expect_no_leftovers "evaluate (after thawing node1)" 30
}

case_partition() {
  bash "$fc" up -p "$prefix" -n 2
  baseline
  start_faulted_run
  bash "$fc" partition -p "$prefix" node1
  finish_faulted_run partition "rank 0 \(node0\): lost node node1 \(ranks 2, 3\): silent for"
  # The ranks cut off on node1 end by themselves, without the link back.
  expect_no_leftovers "partition (link still down)" 45
  bash "$fc" heal -p "$prefix" node1
  resume_and_compare partition
}

case_stall_partition() {
  # Without the heartbeat, the stall watchdog ends a partitioned job; the
  # ranks cut off on node1 reach it too, and their MPI_Abort, which cannot
  # reach the launcher, gives up after its deadline instead of blocking.
  bash "$fc" up -p "$prefix" -n 2
  # shellcheck disable=SC2046
  # Warnings at 10 s: the waiting ranks report to rank 0 from 5 s on, so
  # that its abort names the ranks it cannot hear from.
  cluster_mpiexec 2 2 "$lockstep" $(train_args --epochs 4 --train-subset 8192 --stall-abort-s 20 \
    --stall-warning-s 10 --liveness-timeout-s 0 --run-dir "$work/faulted") >"$work/faulted.txt" 2>&1 &
  job_pid=$!
  wait_for_line "$work/faulted.txt" "^epoch +1/4" "$job_pid"
  fault_start=$(date +%s.%N)
  bash "$fc" partition -p "$prefix" node1
  finish_faulted_run stall_partition "rank 0: stall: .*missing ranks: 2, 3; ending the job"
  expect_no_leftovers "stall_partition (link still down)" 60
}

case_slow_link() {
  # A rate-limited link makes the job slow, not dead: liveness must not end
  # it, it completes, and the epoch's output names the node behind the link
  # (its heartbeat round trips queue behind the gradients).
  bash "$fc" up -p "$prefix" -n 2
  bash "$fc" slow -p "$prefix" node1 1mbit
  # shellcheck disable=SC2046
  cluster_mpiexec 2 2 "$lockstep" $(train_args --epochs 1 --train-subset 2048 --run-dir "$work/slow") \
    >"$work/slow.txt" 2>&1 || fail "slow link: the job failed: $(tail -n 3 "$work/slow.txt")"
  [ -f "$work/slow/COMPLETE" ] || fail "slow link: no COMPLETE"
  if grep -q "lost" "$work/slow.txt"; then fail "slow link: liveness fired: $(grep lost "$work/slow.txt")"; fi
  grep -qE "^slow link: node node1 \(ranks 2, 3\): heartbeat round trip [0-9]+ ms" "$work/slow.txt" ||
    fail "slow link: node1 not named: $(grep -E '^(epoch|slow|straggler)' "$work/slow.txt")"
  expect_no_leftovers "slow link" 10
  echo "slow_link: completed over a 1 Mbit/s link without a liveness report; $(grep '^slow link' "$work/slow.txt")"
}

case_sigterm() {
  # A scheduler's wall time: SIGTERM to mpiexec. The job's exit code must
  # say it did not complete, and nothing may be left on any node.
  bash "$fc" up -p "$prefix" -n 2
  baseline
  start_faulted_run
  local launcher
  launcher=$(bash "$fc" pids -p "$prefix" node0 | xargs -r ps -o pid=,comm= -p | awk '$2 == "mpiexec" {print $1}')
  [ -n "$launcher" ] || fail "sigterm: no mpiexec on node0"
  kill -TERM "$launcher"
  finish_faulted_run sigterm "terminated \(SIGTERM\)"
  [ "$(tail -n 1 "$work/exit_code")" = 143 ] || fail "sigterm: mpiexec exited $(cat "$work/exit_code"), not 143"
  expect_no_leftovers sigterm 30
  resume_and_compare sigterm
}

case_reproducible() {
  # The reproducible mode across nodes: 1 rank at batch 48 and 2 nodes x 2
  # ranks at batch 12 (the same global batch) end with the same state and
  # metrics digests.
  bash "$fc" up -p "$prefix" -n 2
  local args=(--epochs 2 --train-subset 960 --reproducible true --lr-scaling none)
  # shellcheck disable=SC2046
  cluster_mpiexec 1 1 "$lockstep" $(train_args "${args[@]}" --batch-size 48 --run-dir "$work/one") \
    >"$work/one.txt" 2>&1 || fail "1 rank: $(tail -n 3 "$work/one.txt")"
  # shellcheck disable=SC2046
  cluster_mpiexec 2 2 "$lockstep" $(train_args "${args[@]}" --batch-size 12 --run-dir "$work/four") \
    >"$work/four.txt" 2>&1 || fail "2 x 2 ranks: $(tail -n 3 "$work/four.txt")"
  grep -q "4 ranks on 2 nodes" "$work/four.txt" || fail "not on 2 nodes: $(head -n 1 "$work/four.txt")"
  local one four
  one=$(grep "^reproducible: state sha256" "$work/one.txt") || fail "1 rank printed no digest"
  four=$(grep "^reproducible: state sha256" "$work/four.txt") || fail "2 x 2 printed no digest"
  [ "$one" = "$four" ] || fail "digests differ: 1 rank '$one', 2 nodes x 2 ranks '$four'"
  echo "reproducible: 1 rank and 2 nodes x 2 ranks: $four"
}

case_scale() {
  # The scaling study across nodes: 1 rank, 2 ranks on 2 nodes, 4 ranks on 2
  # nodes, through jobs/scale.sh's LAUNCHER template.
  bash "$fc" up -p "$prefix" -n 2
  (cd "$src" && LOCKSTEP="$lockstep" \
    LAUNCHER="bash $fc mpiexec -p $prefix -n 2 --np {n} --" \
    timeout 600 bash jobs/scale.sh --config configs/fashion_mnist.toml --ranks 1,2,4 --epochs 1 \
    --out "$work/scale" --train-subset 2048 --test-subset 500 --threads 1) >"$work/scale.txt" 2>&1 ||
    fail "jobs/scale.sh: $(tail -n 5 "$work/scale.txt")"
  local n
  for n in 1 2 4; do
    grep -qE "^\| $n \| " "$work/scale/scaling.md" || fail "scaling.md has no row for $n ranks"
  done
  grep -q "2 ranks on 2 nodes" "$work/scale/n2/"*.log || fail "2 ranks did not run on 2 nodes"
  grep -q "4 ranks on 2 nodes" "$work/scale/n4/"*.log || fail "4 ranks did not run on 2 nodes"
  [ -s "$work/scale/scaling.png" ] || fail "no scaling.png"
  cat "$work/scale/scaling.md"
}

"case_$case_name"
