// Package hubuspec embeds proto/hubu.openapi.yaml, Hubu's HTTP contract, for tests that
// validate requests and answers against it (see proto/apitest). It is generated apart from
// hubuapi so that no binary links the OpenAPI parser.
package hubuspec
