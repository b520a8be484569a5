#!/bin/sh
# The scripted agent session: every contrib tool, bad arguments, a burst past a rate limit,
# a timeout and a retry, answered by `harness-one run`. No network, no services.
set -eu
cd "$(dirname "$0")"
rm -rf .demo
python make_demo_db.py .demo/shop.sqlite3
HARNESS_ONE_SQL_DB=.demo/shop.sqlite3 \
HARNESS_ONE_STATE=.demo/state.sqlite3 \
  harness-one --tools demo_tools.py run --output text --input session.jsonl
