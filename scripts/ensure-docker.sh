#!/usr/bin/env bash
# ensure-docker.sh — make sure a Docker daemon answers, for make images and make images-test.
#
#   1. `docker info` answers: nothing to do.
#   2. Asked to (HUBU_START_DOCKERD=1, as .ci/run does), as root with dockerd installed: start
#      one in the background without the bridge network and without iptables (the images test
#      runs its containers with --network host, and a sandbox may allow neither), then wait up
#      to 30 s for it to answer. Such a daemon builds and runs the images, but cannot run the
#      compose recipe (deploy/compose.yaml), which needs the bridge network: so it is started
#      only when asked, never behind the back of someone who will run compose next.
#   3. Otherwise fail with one line on stderr saying what is missing.
#
# The daemon it starts logs to ${TMPDIR:-/tmp}/hubu-dockerd.log. Stop it with:
# kill "$(cat /var/run/docker.pid)".
set -euo pipefail

die() { printf 'ensure-docker: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null 2>&1 || die "no docker client: install Docker (Debian: apt-get install docker.io)"
docker info >/dev/null 2>&1 && exit 0
case "${HUBU_START_DOCKERD:-}" in
1) ;;
'' | 0) die "no Docker daemon answers: start Docker (systemctl start docker), or set HUBU_START_DOCKERD=1 to start a bare one here (as root; no bridge network, so not for docker compose)" ;;
*) die "HUBU_START_DOCKERD=$HUBU_START_DOCKERD: use 1 to start a Docker daemon, or leave it unset" ;;
esac
command -v dockerd >/dev/null 2>&1 || die "HUBU_START_DOCKERD=1 but dockerd is missing: install the daemon (Debian: apt-get install docker.io)"
[ "$(id -u)" = 0 ] || die "HUBU_START_DOCKERD=1, but starting dockerd needs root: start Docker (systemctl start docker) or join the docker group"

log="${TMPDIR:-/tmp}/hubu-dockerd.log"
printf 'ensure-docker: starting dockerd without a bridge network or iptables, as HUBU_START_DOCKERD=1 asks (log: %s)\n' "$log" >&2
setsid nohup dockerd --iptables=false --bridge=none >>"$log" 2>&1 </dev/null &
for _ in $(seq 1 60); do
	docker info >/dev/null 2>&1 && exit 0
	sleep 0.5
done
die "dockerd did not answer within 30 s; its log, $log, ends with: $(tail -n 1 "$log")"
