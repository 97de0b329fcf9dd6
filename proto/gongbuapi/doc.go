// Package gongbuapi holds the Go types, chi server interface and HTTP client generated from
// proto/gongbu.openapi.yaml, Gongbu's HTTP contract.
package gongbuapi
