#!/bin/sh
# The scripted agent session: every contrib tool, bad arguments, a burst past a rate limit,
# a timeout and a retry, answered by `harness-one run`. No network, no services.
set -eu
cd "$(dirname "$0")"
# The same session whatever the shell holds: no HARNESS_ONE_* variable of the caller's applies (state,
# Redis, configuration file, plugins, tools), and the state is a fresh file of its own, given as a flag.
for name in $(env | sed -n 's/^\(HARNESS_ONE_[A-Za-z0-9_]*\)=.*/\1/p'); do
  unset "$name"
done
rm -rf .demo
python make_demo_db.py .demo/shop.sqlite3
HARNESS_ONE_SQL_DB=.demo/shop.sqlite3 \
  harness-one --state .demo/state.sqlite3 --tools demo_tools.py run --output text --input session.jsonl
