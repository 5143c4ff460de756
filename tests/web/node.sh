#!/bin/sh
# Runs one of the web viewer's node test scripts; without node the test skips.
if ! command -v node >/dev/null 2>&1; then
    echo "1..0 # skip node is not installed"
    exit 0
fi
exec node "$@"
