# Sourced by tests/run.sh and tests/fuzz/run_fuzz.sh. A script's background
# jobs ignore SIGINT, so Ctrl-C would leave them running: stop_jobs_on_signal
# makes SIGINT and SIGTERM end every job whose pid is in the array
# background_jobs, and everything each started, then exit 130 or 143.
background_jobs=()
kill_tree() {
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill -TERM "$1" 2>/dev/null || true
}
stop_jobs() {
  trap - INT TERM
  local pid
  for pid in "${background_jobs[@]}"; do kill_tree "$pid"; done
  exit "$1"
}
stop_jobs_on_signal() {
  trap 'stop_jobs 130' INT
  trap 'stop_jobs 143' TERM
}
