// Package bflspec embeds proto/bfl.openapi.yaml, the FLUX API's HTTP contract, for tests that
// validate requests and answers against it (see proto/apitest). It is generated apart from
// bflapi so that no binary links the OpenAPI parser.
package bflspec
