#!/usr/bin/env bash
# Fails when a process whose command line refers to the checkout is still
# running: what `make demo`, `make test`, `make bench` and the local cluster
# start must be stopped by the time they return.
#
#   hack/check-no-leftovers.sh          look for the checkout's absolute path
#   hack/check-no-leftovers.sh NEEDLE   look for NEEDLE instead (a test's
#                                       temporary directory, say)
#
# Exits 0 when none is found, 1 with one "PID COMMAND" line per process
# otherwise. This script and its ancestors (the shell, make, CI) are not
# counted. The scan runs builtins only, so it forks nothing it could find.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
needle="${1:-$root}"
[[ -n "$needle" ]] || { echo "check-no-leftovers: empty NEEDLE" >&2; exit 2; }

declare -A ours=()
pid=$$
while [[ "$pid" =~ ^[1-9][0-9]*$ && -z "${ours[$pid]:-}" ]]; do
  ours[$pid]=1
  ppid=0
  while read -r key value; do
    if [[ "$key" == PPid: ]]; then ppid="$value"; break; fi
  done 2>/dev/null <"/proc/$pid/status" || true
  pid="$ppid"
done

found=()
for dir in /proc/[0-9]*; do
  pid="${dir#/proc/}"
  [[ -z "${ours[$pid]:-}" ]] || continue
  args=()
  mapfile -d '' -t args 2>/dev/null <"$dir/cmdline" || continue # gone meanwhile
  ((${#args[@]})) || continue # kernel thread or zombie
  command="${args[*]}"
  [[ "$command" == *"$needle"* ]] || continue
  ((${#command} <= 300)) || command="${command:0:300}..."
  found+=("$pid $command")
done

if ((${#found[@]} == 0)); then
  echo "no process left that refers to $needle"
  exit 0
fi
echo "${#found[@]} process(es) still running that refer to $needle; whatever started them did not stop them:"
printf '%s\n' "${found[@]}"
exit 1
