# Shared by hack/demo.sh and hack/demo-images.sh (sourced, not run): the
# output helpers, and a clean-up that stops whatever the demo started on the
# way out, whether it succeeded, failed or was interrupted (Ctrl-C, SIGTERM,
# a closed terminal).
#
# A demo sources this file, then calls demo_traps before it starts anything,
# and names each background process it starts with
#   agent_pid=$!; demo_stops "the agent" agent_pid
# The clean-up stops them last started first, then the local control plane.

bold=$'\033[1m'; dim=$'\033[2m'; reset=$'\033[0m'
[[ -t 1 ]] || { bold=""; dim=""; reset=""; }
say()  { printf '\n%s==> %s%s\n' "$bold" "$*" "$reset"; }
note() { printf '%s    %s%s\n' "$dim" "$*" "$reset"; }
show() { printf '%s$ %s%s\n' "$dim" "$*" "$reset"; }
run()  { show "$@"; "$@"; }

# demo_stoppable holds "label:variable" pairs, in the order they were started.
demo_stoppable=()
demo_stops() { demo_stoppable+=("$1:$2"); }

# stop VAR sends the process whose pid is in VAR SIGTERM, gives it 30 s to
# shut down, then SIGKILL, reaps it and empties VAR.
stop() {
  local pid="${!1}" state
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || break
    # A zombie still takes signal 0: the process has exited, wait reaps it.
    state=""; read -r _ _ state _ 2>/dev/null <"/proc/$pid/stat" || true
    [[ "$state" != Z ]] || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  printf -v "$1" ''
}

demo_cleanup() {
  [[ "$BASHPID" == "$$" ]] || return 0 # a subshell caught the signal too; the script cleans up
  trap '' HUP INT TERM # a second Ctrl-C does not cut the clean-up short
  exec 1>&3 2>&4
  cd "$root"
  local i entry label var
  for ((i = ${#demo_stoppable[@]} - 1; i >= 0; i--)); do
    entry="${demo_stoppable[i]}"; label="${entry%%:*}"; var="${entry#*:}"
    if [[ -n "${!var}" ]]; then
      say "Stopping $label (pid ${!var})"
      stop "$var"
    fi
  done
  say "Stopping the local control plane"
  hack/local-cluster.sh down
}

# start_agent starts the agent command in the array agent (shown first),
# its output in $demo_dir/agent.log, and registers it for the clean-up.
# Started directly, not through run: $! is then the agent itself.
start_agent() {
  show "${agent[@]}" "&"
  "${agent[@]}" >"$demo_dir/agent.log" 2>&1 3>&- 4>&- &
  agent_pid=$!
  demo_stops "the agent" agent_pid
  note "agent pid $agent_pid, log in ${demo_dir#"$root"/}/agent.log"
}

# wait_for DESCRIPTION COMMAND... polls until COMMAND succeeds (60 s); if
# the agent exits or time runs out, it shows the agent's log and fails.
wait_for() {
  local what="$1"; shift
  for _ in $(seq 1 120); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$agent_pid" 2>/dev/null; then
      echo "the agent exited; its log:"; tail -20 "$demo_dir/agent.log"; exit 1
    fi
    sleep 0.5
  done
  echo "timed out waiting for $what; agent log:"; tail -20 "$demo_dir/agent.log"; exit 1
}

# demo_traps installs the clean-up. An interrupt can land inside a command
# whose output is discarded, so the clean-up writes to the demo's own
# output, kept on fds 3 and 4 (closed for the cluster and the processes the
# demo starts, which outlive the command that starts them).
demo_traps() {
  exec 3>&1 4>&2
  trap demo_cleanup EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
