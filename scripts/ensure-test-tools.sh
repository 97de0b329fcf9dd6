#!/usr/bin/env bash
# ensure-test-tools.sh — make sure every outside program `make test` drives is here, before
# any test runs.
#
# Each tool is found on PATH, or where its setting says (HUBU_CHROMIUM, HUBU_PROMETHEUS,
# HUBU_PROMTOOL). What is missing is installed from Debian or Ubuntu packages when this runs as
# root (or with password-less sudo) on a machine with apt-get, unless HUBU_NO_INSTALL=1. Whatever
# is still missing after that is named, all of it, in one line on stderr, and the script fails.
#
# The tools, and the tests that need them:
#   node (20 or later) and npm   the router's tests drive the official TypeScript MCP client
#   chromium                     the approval console in a real browser
#   prometheus, promtool         the alert rules, run against a real stack
#   zsh                          the README's quick start, pasted into zsh as well as bash
#   pg_dump, pg_restore          the runbook's backup and restore
#   git, with full history       the rolling upgrade builds the previous release from history
#   curl                         the MCP reference's curl example, run as written
#   a C compiler (gcc)           go test -race, which needs cgo
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
NODE_MAJOR=20

say() { printf 'ensure-test-tools: %s\n' "$*" >&2; }

# found NAME... — true when any of the names is a program on PATH.
found() {
	local n
	for n in "$@"; do
		command -v "$n" >/dev/null 2>&1 && return 0
	done
	return 1
}

# setting_or_found VALUE NAME... — VALUE, when set, must be a program (the tests use it alone);
# else any of the names on PATH will do.
setting_or_found() {
	local value=$1
	shift
	if [ -n "$value" ]; then
		command -v "$value" >/dev/null 2>&1
	else
		found "$@"
	fi
}

node_ok() {
	found node || return 1
	local major
	major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null) || return 1
	[ "$major" -ge "$NODE_MAJOR" ]
}

# missing prints one "tool:package" entry per missing tool; package is what apt-get installs.
missing() {
	if ! node_ok; then
		# Debian 12's own nodejs is 18: say what is here, so the fix (a newer Node) is plain.
		local have=""
		found node && have=" (this machine has $(node --version 2>/dev/null))"
		echo "Node.js $NODE_MAJOR+ with npm$have:nodejs npm"
	elif ! found npm; then
		echo "npm:npm"
	fi
	setting_or_found "${HUBU_CHROMIUM:-}" chromium chromium-browser google-chrome google-chrome-stable || echo "chromium:chromium"
	setting_or_found "${HUBU_PROMETHEUS:-}" prometheus || echo "prometheus:prometheus"
	setting_or_found "${HUBU_PROMTOOL:-}" promtool || echo "promtool:prometheus"
	found zsh || echo "zsh:zsh"
	found pg_dump || echo "pg_dump:postgresql-client"
	found pg_restore || echo "pg_restore:postgresql-client"
	found git || echo "git:git"
	found curl || echo "curl:curl"
	# go test -race needs cgo, and cgo a C compiler: without one Go turns cgo off.
	local cc=${CC:-}
	setting_or_found "${cc%% *}" gcc cc || echo "a C compiler (go test -race):gcc libc6-dev"
}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	else
		sudo -n "$@"
	fi
}

can_install() {
	[ "${HUBU_NO_INSTALL:-}" != 1 ] && command -v apt-get >/dev/null 2>&1 &&
		{ [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; }
}

want=$(missing)
if [ -n "$want" ] && can_install; then
	# shellcheck disable=SC2086 # the package names are words
	packages=$(printf '%s\n' "$want" | cut -d: -f2 | tr ' ' '\n' | sort -u | tr '\n' ' ')
	say "installing $packages(Debian packages)"
	as_root apt-get update -qq >&2
	for p in $packages; do
		# One at a time, so one the distribution lacks (Ubuntu's chromium is a snap) does not stop the rest.
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" </dev/null >&2 ||
			say "apt-get could not install $p"
	done
	want=$(missing)
fi

# The upgrade test needs the previous release's commit; a shallow clone has no history.
if [ "$(git -C "$ROOT" rev-parse --is-shallow-repository 2>/dev/null || echo false)" = true ]; then
	want="${want:+$want$'\n'}full git history (git fetch --unshallow):"
fi

if [ -n "$want" ]; then
	say "make test needs, and this machine lacks: $(printf '%s\n' "$want" | cut -d: -f1 | paste -sd, - | sed 's/,/, /g') (see docs/development.md#requirements)"
	exit 1
fi
