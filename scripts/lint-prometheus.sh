#!/usr/bin/env bash
# lint-prometheus.sh checks the Prometheus alert rules in deploy/prometheus: promtool finds them
# valid, and their unit tests (alerts_test.yml) pass. `make lint` runs it. promtool comes with
# Debian's prometheus package, installed with apt-get when it is missing and we are root.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "promtool not found; installing Debian's prometheus package with apt-get" >&2
		apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
	else
		echo "promtool not found: install it (apt-get install prometheus) to check deploy/prometheus" >&2
		exit 1
	fi
fi
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml
