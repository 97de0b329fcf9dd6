#!/usr/bin/env bash
# build-images.sh — build Hubu's container images (make images): one per binary, from
# deploy/Dockerfile, tagged ${HUBU_IMAGE_PREFIX}NAME:${HUBU_IMAGE_TAG} (default hubu/NAME:dev, the
# names deploy/compose.yaml reads too); HUBU_VERSION, when set, is the version the binaries report.
#
# The binaries are built here, on the host, static and CGO-free (CGO_ENABLED=0, -trimpath,
# symbols stripped), so the images need no base image and no registry: each is FROM scratch
# plus the host's CA bundle and a passwd line for the unprivileged user 65532.
# Prints one line per image and the time it took.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
PREFIX="${HUBU_IMAGE_PREFIX-hubu/}"
TAG="${HUBU_IMAGE_TAG:-dev}"
CA="${HUBU_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
IMAGES=(hubu gongbu mockflux hubu-unified-mcp)

die() { printf 'build-images: %s\n' "$*" >&2; exit 1; }
# The names these had before, which compose never read: refused, since ignoring them would build :dev.
[ -z "${IMAGE_PREFIX+set}${IMAGE_TAG+set}" ] || die "IMAGE_PREFIX and IMAGE_TAG are now HUBU_IMAGE_PREFIX and HUBU_IMAGE_TAG, the names deploy/compose.yaml reads too"
[ -r "$CA" ] || die "no CA bundle at $CA (install ca-certificates, or set HUBU_CA_BUNDLE)"
command -v docker >/dev/null 2>&1 || die "docker is not installed (scripts/ensure-docker.sh says how to get it)"

start=$(date +%s)
ctx="$(mktemp -d "${TMPDIR:-/tmp}/hubu-images.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/bin" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/state"
chmod 1777 "$ctx/rootfs/tmp"
cp "$CA" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' > "$ctx/rootfs/etc/passwd"
printf 'nonroot:x:65532:\n' > "$ctx/rootfs/etc/group"
chmod 0644 "$ctx/rootfs/etc/passwd" "$ctx/rootfs/etc/group" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"

# What --version prints (kit/buildinfo): Go records no commit in a workspace build, so the
# commit, its time and whether the tree had changes are set here; the version only when
# HUBU_VERSION names a release.
ldflags='-s -w'
pkg=hubu.dev/hubu/kit/buildinfo
if commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null); then
	modified=false
	[ -z "$(git -C "$ROOT" status --porcelain 2>/dev/null)" ] || modified=true
	ldflags+=" -X $pkg.commit=$commit -X $pkg.date=$(git -C "$ROOT" show -s --format=%cI HEAD) -X $pkg.modified=$modified"
fi
[ -z "${HUBU_VERSION:-}" ] || ldflags+=" -X $pkg.version=$HUBU_VERSION"

(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$ctx/bin/" \
	./services/hubu/cmd/... ./services/gongbu/cmd/... ./services/mockflux/cmd/... ./router/cmd/...)
built=$(date +%s)

for image in "${IMAGES[@]}"; do
	ref="$PREFIX$image:$TAG"
	old=$(docker image inspect --format '{{.Id}}' "$ref" 2>/dev/null || true)
	# The legacy builder (no buildx here) says it is deprecated on stderr; only failures matter.
	if ! out=$(docker build --quiet --file "$ROOT/deploy/Dockerfile" --target "$image" --tag "$ref" "$ctx" 2>&1); then
		die "docker build --target $image: $out"
	fi
	# The image this tag named before, now named by nothing (docker refuses while anything
	# else names or runs it), would otherwise pile up with every build.
	if [ -n "$old" ] && [ "$old" != "$(docker image inspect --format '{{.Id}}' "$ref")" ]; then
		docker rmi "$old" >/dev/null 2>&1 || true
	fi
	printf 'build-images: %s %s\n' "$ref" "$(docker image inspect --format '{{.Size}}' "$ref" | awk '{printf "%.1f MB", $1/1e6}')"
done
printf 'build-images: binaries %ss, images %ss, total %ss\n' "$((built - start))" "$(($(date +%s) - built))" "$(($(date +%s) - start))"
