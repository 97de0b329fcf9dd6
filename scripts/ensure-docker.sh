#!/usr/bin/env bash
# ensure-docker.sh — make sure a Docker daemon answers, for make images and make images-test.
#
#   1. `docker info` answers: nothing to do.
#   2. As root, with dockerd installed: start it in the background without the bridge
#      network and without iptables (the images test runs its containers with --network host,
#      and a sandbox may not allow either), then wait up to 30 s for it to answer.
#   3. Otherwise fail with one line on stderr saying what is missing.
#
# Its log is ${TMPDIR:-/tmp}/hubu-dockerd.log. Stop it with: kill "$(cat /var/run/docker.pid)".
set -euo pipefail

die() { printf 'ensure-docker: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null 2>&1 || die "no docker client: install Docker (Debian: apt-get install docker.io)"
docker info >/dev/null 2>&1 && exit 0
command -v dockerd >/dev/null 2>&1 || die "docker is installed but no daemon answers and dockerd is missing: install the daemon (Debian: apt-get install docker.io) or start Docker"
[ "$(id -u)" = 0 ] || die "no Docker daemon answers, and starting dockerd needs root: start Docker (systemctl start docker) or join the docker group"

log="${TMPDIR:-/tmp}/hubu-dockerd.log"
printf 'ensure-docker: starting dockerd (log: %s)\n' "$log" >&2
setsid nohup dockerd --iptables=false --bridge=none >>"$log" 2>&1 </dev/null &
for _ in $(seq 1 60); do
	docker info >/dev/null 2>&1 && exit 0
	sleep 0.5
done
die "dockerd did not answer within 30 s; its log, $log, ends with: $(tail -n 1 "$log")"
