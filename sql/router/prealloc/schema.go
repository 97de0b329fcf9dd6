// Package prealloc carries the schema of a preallocated-keys file and (in preallocdb) the
// Go code sqlc compiles from its queries.
package prealloc

import _ "embed"

// Schema creates the table of a preallocated-keys file; it is safe to run on an existing file.
//
//go:embed schema.sql
var Schema string
