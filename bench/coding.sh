#!/usr/bin/env bash
# coding.sh: the coding agent's figures (issue on the complete agent loop):
# the example coding agent fixing its failing Go test against a scripted
# fake of each family's API, with that family's editing tool, and the
# tokens billed at full price for a ten-round tool loop on Anthropic's
# API with prompt caching on and off (a fake that applies the documented
# cache rules).
set -euo pipefail
cd "$(dirname "$0")/.."
go test -count=1 ./bot -run 'TestCodingAgentExample$|TestCodingAgentFamilies' -v 2>&1 | grep -E '^(=== RUN|--- |ok|FAIL)'
go test -count=1 ./provider/anthropic -run 'TestCachedToolLoop$' -v 2>&1 | grep -E 'ten rounds|^(--- |ok|FAIL)'
