// Package hubuapi holds the Go types, chi server interface and HTTP client generated from
// proto/hubu.openapi.yaml, Hubu's HTTP contract.
package hubuapi
