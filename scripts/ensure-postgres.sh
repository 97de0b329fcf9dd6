#!/usr/bin/env bash
# ensure-postgres.sh — make sure a PostgreSQL server is reachable for
# `make test` / `make up`, then print exactly one line on stdout: a libpq URL
# to a superuser connection on a maintenance database.
#
# Resolution order:
#   1. $TEST_DATABASE_URL, else $DATABASE_URL (printed as-is, no probing).
#   2. A server already listening on 127.0.0.1:5432 (override the probe with
#      HUBU_PG_PROBE_HOST / HUBU_PG_PROBE_PORT).
#   3. A private trust-auth cluster under <repo>/.hubu/postgres, created and
#      started from the installed PostgreSQL server binaries, listening on
#      127.0.0.1:$HUBU_PG_PRIVATE_PORT (default 55432).
#   4. As root with apt-get: install the `postgresql` package, then do 3.
#   5. Otherwise fail with one line on stderr saying what is missing.
#
# `ensure-postgres.sh --private` skips step 2 (make up keeps its data in its own cluster
# unless DATABASE_URL names one). `ensure-postgres.sh stop` stops the private cluster.
#
# Everything except the final URL goes to stderr.
set -euo pipefail

# fd 3 is the real stdout (for the URL only); everything else goes to stderr.
exec 3>&1 1>&2

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
PROBE_HOST="${HUBU_PG_PROBE_HOST:-127.0.0.1}"
PROBE_PORT="${HUBU_PG_PROBE_PORT:-5432}"
PRIVATE_PORT="${HUBU_PG_PRIVATE_PORT:-55432}"
HUBU_DIR="$ROOT/.hubu"
PRIMARY_DIR="$HUBU_DIR/postgres"

say() { printf 'ensure-postgres: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
emit() { printf '%s\n' "$1" >&3; exit 0; }
url_for_port() { printf 'postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable' "$1"; }

path_hash() {
	if command -v sha256sum >/dev/null 2>&1; then
		printf '%s' "$ROOT" | sha256sum | cut -c1-12
	elif command -v md5sum >/dev/null 2>&1; then
		printf '%s' "$ROOT" | md5sum | cut -c1-12
	else
		printf '%s' "$ROOT" | cksum | cut -d' ' -f1
	fi
}
FALLBACK_DIR="/tmp/hubu-postgres-$(path_hash)"

# tcp_open HOST PORT: true if HOST:PORT accepts TCP connections.
tcp_open() {
	local probe='exec 5<>"/dev/tcp/$0/$1"'
	if command -v timeout >/dev/null 2>&1; then
		timeout 2 bash -c "$probe" "$1" "$2" 2>/dev/null
	else
		bash -c "$probe" "$1" "$2" 2>/dev/null
	fi
}

# ---------------------------------------------------------------- binaries

# find_bindir [MAJOR]: print a directory holding initdb and pg_ctl.
# Prefers the given major version (to match an existing data dir), then the
# newest /usr/lib/postgresql/*/bin, then `pg_config --bindir`, then PATH.
find_bindir() {
	local want="${1:-}" d
	if [[ -n "$want" && -x "/usr/lib/postgresql/$want/bin/initdb" && -x "/usr/lib/postgresql/$want/bin/pg_ctl" ]]; then
		echo "/usr/lib/postgresql/$want/bin"; return 0
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -V -r); do
		if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then echo "$d"; return 0; fi
	done
	if command -v pg_config >/dev/null 2>&1; then
		d="$(pg_config --bindir 2>/dev/null || true)"
		if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then echo "$d"; return 0; fi
	fi
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		dirname "$(command -v initdb)"; return 0
	fi
	return 1
}

# ---------------------------------------------------------------- users

IS_ROOT=0
[[ "$(id -u)" == 0 ]] && IS_ROOT=1
RUN_USER=""   # set when running as root: the unprivileged user owning the cluster

# as_user CMD...: run CMD as $RUN_USER (or directly when not root), from /,
# without our private fds (the postmaster must not hold the URL pipe or lock).
as_user() {
	if [[ "$IS_ROOT" == 0 ]]; then
		(cd / && "$@") 3>&- 9>&-
	elif command -v runuser >/dev/null 2>&1; then
		(cd / && runuser -u "$RUN_USER" -- "$@") 3>&- 9>&-
	elif command -v setpriv >/dev/null 2>&1; then
		(cd / && setpriv --reuid="$RUN_USER" --regid="$(id -g "$RUN_USER")" --init-groups -- "$@") 3>&- 9>&-
	elif command -v su >/dev/null 2>&1; then
		(cd / && su -s /bin/bash "$RUN_USER" -c "$(printf '%q ' "$@")") 3>&- 9>&-
	else
		die "running as root but none of runuser, setpriv, su is available to drop privileges"
	fi
}

pick_run_user() {
	if id postgres >/dev/null 2>&1; then RUN_USER=postgres; return; fi
	if ! id hubu-pg >/dev/null 2>&1; then
		say "creating system user hubu-pg to run the private cluster"
		if command -v useradd >/dev/null 2>&1; then
			useradd --system --no-create-home --home-dir / --shell /usr/sbin/nologin hubu-pg
		elif command -v adduser >/dev/null 2>&1; then
			adduser --system --no-create-home --group hubu-pg 2>/dev/null || adduser -S -D -H hubu-pg
		else
			die "running as root, no 'postgres' user, and no useradd/adduser to create one"
		fi
	fi
	RUN_USER=hubu-pg
}

# ---------------------------------------------------------------- cluster

# status_running DIR: true if the cluster in DIR/data is running.
status_running() {
	local dir="$1" bindir="$2"
	[[ -f "$dir/data/PG_VERSION" ]] || return 1
	as_user "$bindir/pg_ctl" status -D "$dir/data" >/dev/null 2>&1
}

# running_port DIR: port of the running postmaster (from postmaster.pid).
running_port() {
	local p
	p="$(sed -n 4p "$1/data/postmaster.pid" 2>/dev/null || true)"
	[[ "$p" =~ ^[0-9]+$ ]] && echo "$p" || echo "$PRIVATE_PORT"
}

# prepare_dir DIR: create DIR for the cluster owner; true if that user can use it.
prepare_dir() {
	local dir="$1"
	mkdir -p "$dir"
	if [[ "$IS_ROOT" == 1 ]]; then
		chown "$RUN_USER:" "$dir"
		chmod 0700 "$dir"
	fi
	as_user test -x "$dir" 2>/dev/null && as_user test -w "$dir" 2>/dev/null
}

# choose_cluster_dir: set CLUSTER_DIR to an existing cluster, else a new usable dir.
choose_cluster_dir() {
	local d
	for d in "$PRIMARY_DIR" "$FALLBACK_DIR"; do
		if [[ -f "$d/data/PG_VERSION" ]]; then CLUSTER_DIR="$d"; return; fi
	done
	if prepare_dir "$PRIMARY_DIR"; then CLUSTER_DIR="$PRIMARY_DIR"; return; fi
	rmdir "$PRIMARY_DIR" 2>/dev/null || true
	say "user ${RUN_USER:-$(id -un)} cannot reach $PRIMARY_DIR (a parent dir is not traversable); using $FALLBACK_DIR instead"
	prepare_dir "$FALLBACK_DIR" || die "cannot prepare a usable cluster directory at $FALLBACK_DIR"
	CLUSTER_DIR="$FALLBACK_DIR"
}

start_private_cluster() {
	local bindir="$1" dir data sockdir port sockopt i
	CLUSTER_DIR=""
	choose_cluster_dir
	dir="$CLUSTER_DIR" data="$CLUSTER_DIR/data"

	if [[ "$IS_ROOT" == 1 && -d "$data" ]]; then
		RUN_USER="$(stat -c %U "$data")"   # whoever created the cluster keeps running it
		[[ "$RUN_USER" != root ]] || die "$data is owned by root; remove $dir and retry"
	fi
	if [[ -f "$data/PG_VERSION" ]]; then
		bindir="$(find_bindir "$(cat "$data/PG_VERSION")")" || bindir="$1"
	fi

	if [[ ! -f "$data/PG_VERSION" ]]; then
		say "initializing private cluster in $data ($("$bindir/initdb" --version 2>/dev/null || echo initdb))"
		as_user "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
			{ cat "$dir/initdb.log" >&2; die "initdb failed (log: $dir/initdb.log)"; }
	fi

	if status_running "$dir" "$bindir"; then
		port="$(running_port "$dir")"
		say "reusing private cluster in $data on port $port"
	else
		port="$PRIVATE_PORT"
		if tcp_open 127.0.0.1 "$port"; then
			die "port $port is already in use by something else; set HUBU_PG_PRIVATE_PORT to a free port"
		fi
		sockdir="$dir/run"
		mkdir -p "$sockdir"
		[[ "$IS_ROOT" == 1 ]] && chown "$RUN_USER:" "$sockdir"
		# Unix socket paths are limited to ~107 bytes; fall back to TCP only.
		if (( ${#sockdir} + 20 < 100 )); then
			sockopt="-k '$sockdir'"
		else
			sockopt="-c unix_socket_directories=''"
		fi
		say "starting private cluster in $data on 127.0.0.1:$port"
		if ! as_user "$bindir/pg_ctl" -D "$data" -w -t 60 -l "$dir/log" start \
			-o "-p $port $sockopt -c listen_addresses=127.0.0.1" >/dev/null; then
			tail -n 20 "$dir/log" >&2 || true
			die "pg_ctl start failed (log: $dir/log)"
		fi
	fi

	for ((i = 0; i < 60; i++)); do
		if tcp_open 127.0.0.1 "$port"; then emit "$(url_for_port "$port")"; fi
		sleep 0.5
	done
	die "private cluster in $data did not accept connections on 127.0.0.1:$port (log: $dir/log)"
}

with_lock() {
	if [[ ! -d "$HUBU_DIR" ]]; then
		mkdir -p "$HUBU_DIR"
		chmod 0755 "$HUBU_DIR"   # the cluster user must be able to traverse it
	fi
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$HUBU_DIR/ensure-postgres.lock"
		flock -w 180 9 || die "timed out waiting for another ensure-postgres run"
	fi
}

# ---------------------------------------------------------------- stop

stop_cluster() {
	local d data bindir found=0
	for d in "$PRIMARY_DIR" "$FALLBACK_DIR"; do
		data="$d/data"
		[[ -f "$data/PG_VERSION" ]] || continue
		found=1
		bindir="$(find_bindir "$(cat "$data/PG_VERSION")")" ||
			die "no PostgreSQL server binaries (pg_ctl) found to stop the cluster in $data"
		if [[ "$IS_ROOT" == 1 ]]; then RUN_USER="$(stat -c %U "$data")"; fi
		if status_running "$d" "$bindir"; then
			say "stopping private cluster in $data"
			as_user "$bindir/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null
		else
			say "private cluster in $data is not running"
		fi
	done
	[[ "$found" == 1 ]] || say "no private cluster under $PRIMARY_DIR or $FALLBACK_DIR; nothing to stop"
	exit 0
}

# ---------------------------------------------------------------- main

case "${1:-}" in
	"" | start) ;;
	--private) PRIVATE_ONLY=1 ;;
	stop) [[ -d "$HUBU_DIR" ]] && with_lock; stop_cluster ;;
	-h | --help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (usage: $0 [--private|stop])" ;;
esac

# 1. Explicit configuration.
if [[ -n "${TEST_DATABASE_URL:-}" ]]; then emit "$TEST_DATABASE_URL"; fi
if [[ -n "${DATABASE_URL:-}" ]]; then emit "$DATABASE_URL"; fi

# 2. (not with --private, which make up uses) A server already running on the standard port, if user postgres can log in without a
#    password (a distribution's default cluster often asks for one over TCP; then a private
#    cluster is the way). Without psql to try a login, an open port has to do.
if [[ -z "${PRIVATE_ONLY:-}" ]] && tcp_open "$PROBE_HOST" "$PROBE_PORT"; then
	url="postgres://postgres@$PROBE_HOST:$PROBE_PORT/postgres?sslmode=disable"
	if ! command -v psql >/dev/null 2>&1; then
		emit "$url"
	elif PGCONNECT_TIMEOUT=5 psql "$url" -XAtqc 'select 1' </dev/null >/dev/null 2>&1; then
		emit "$url"
	fi
	say "a PostgreSQL answers on $PROBE_HOST:$PROBE_PORT but user postgres cannot log in without a password; starting a private cluster instead"
fi

# 3./4. A private cluster from installed (or freshly installed) binaries.
[[ "$IS_ROOT" == 1 ]] && pick_run_user
if BINDIR="$(find_bindir)"; then
	with_lock
	start_private_cluster "$BINDIR"
fi

if [[ "$IS_ROOT" == 1 ]] && command -v apt-get >/dev/null 2>&1; then
	say "no PostgreSQL at $PROBE_HOST:$PROBE_PORT and no server binaries; installing the postgresql package with apt-get"
	apt-get update -qq 3>&- </dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql 3>&- </dev/null
	BINDIR="$(find_bindir)" || die "installed postgresql but still found no initdb/pg_ctl"
	with_lock
	start_private_cluster "$BINDIR"
fi

# 5. Nothing worked.
if [[ "$IS_ROOT" == 1 ]]; then why="no apt-get"; else why="not root"; fi
die "no PostgreSQL at $PROBE_HOST:$PROBE_PORT, no server binaries (initdb) found, and cannot install them ($why); install postgresql or set DATABASE_URL"
