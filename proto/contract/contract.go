// Package contract holds the formats every layer must agree on byte for byte: the router's
// private operation key, the public handle an agent sees, the FLUX models with their limits and
// a spend's request (models.go), and the image types a result may have. The OpenAPI specs
// beside it (../*.openapi.yaml) state the same rules for HTTP, and the router's tool schemas
// state them for MCP; tests keep each of them equal to this.
package contract

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Key and handle formats: hubu:operation:v1:<platform>:<uuid> is the router's private key,
// never shown to an agent; hubu:public-operation:v1:<uuid> is the handle it may see and pass
// back. Both end in a random UUID of their own, so one cannot be derived from the other.
const (
	OperationKeyPrefix = "hubu:operation:v1:"
	PublicHandlePrefix = "hubu:public-operation:v1:"

	uuidPattern = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	// PublicHandlePattern and OperationKeyPattern are the specs' patterns.
	PublicHandlePattern = `^hubu:public-operation:v1:` + uuidPattern + `$`
	OperationKeyPattern = `^hubu:operation:v1:[a-z0-9][a-z0-9-]{0,31}:` + uuidPattern + `$`
)

var (
	publicHandleRE = regexp.MustCompile(PublicHandlePattern)
	operationKeyRE = regexp.MustCompile(OperationKeyPattern)
)

// NewPublicHandle returns a fresh public handle.
func NewPublicHandle() string { return PublicHandlePrefix + uuid.NewString() }

// NewOperationKey returns a fresh private operation key for a call from platform.
func NewOperationKey(platform string) string {
	return OperationKeyPrefix + platform + ":" + uuid.NewString()
}

// IsPublicHandle reports whether s is a well-formed public handle.
func IsPublicHandle(s string) bool { return publicHandleRE.MatchString(s) }

// IsOperationKey reports whether s is a well-formed private operation key.
func IsOperationKey(s string) bool { return operationKeyRE.MatchString(s) }

// ValidPrompt reports whether p is 1 to max characters of UTF-8 without NUL.
func ValidPrompt(p string, max int) bool {
	n := utf8.RuneCountInString(p)
	return n > 0 && n <= max && utf8.ValidString(p) && !strings.ContainsRune(p, 0)
}

// The image types a result may have: what Gongbu keeps and the router embeds. Anything else a
// provider's link serves (SVG above all, which can carry script) is refused.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/webp": true}

// CheckImage reports why b is not a non-empty image of a kept type whose bytes are what its
// declared type says (by http.DetectContentType's sniffing), or nil when it is.
func CheckImage(mimeType string, b []byte) error {
	switch {
	case !imageTypes[mimeType]:
		return fmt.Errorf("%q is not a PNG, JPEG or WebP image", mimeType)
	case len(b) == 0:
		return errors.New("the image is empty")
	}
	if sniffed := http.DetectContentType(b); sniffed != mimeType {
		return fmt.Errorf("the image is declared %s but is %s", mimeType, sniffed)
	}
	return nil
}

// GrantHeader names, on a request a router makes with its own credential, the OAuth grant it
// acts for: the grant of the token a person presented to it. Hubu takes it from a router's
// credential only, and then answers as the grant's agent.
const GrantHeader = "Hubu-Grant"
