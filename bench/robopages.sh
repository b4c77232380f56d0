#!/bin/sh
# Robopages: cost of POST /process for one echo call above starting echo
# directly (median of paired samples), and throughput with 200 callers.
# Usage: bench/robopages.sh [count]
set -e
cd "$(dirname "$0")/.."
go test ./robopage/pageserver -run '^$' \
	-bench 'ProcessOverhead|SpawnEcho|ExecutorEcho|ProcessEcho' \
	-benchtime 500x -count "${1:-3}"
