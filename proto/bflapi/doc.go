// Package bflapi holds the Go types, chi server interface and HTTP client generated from
// proto/bfl.openapi.yaml, the Black Forest Labs FLUX API as Hubu uses it (and as mockflux
// serves it, with its mock-only routes).
package bflapi
