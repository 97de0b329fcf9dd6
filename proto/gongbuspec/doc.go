// Package gongbuspec embeds proto/gongbu.openapi.yaml, Gongbu's HTTP contract, for tests that
// validate requests and answers against it (see proto/apitest). It is generated apart from
// gongbuapi so that no binary links the OpenAPI parser.
package gongbuspec
