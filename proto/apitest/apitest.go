// Package apitest checks real HTTP responses against an OpenAPI spec of proto/. Tests wrap
// their client's transport with it, so every response a test sees is proved to match the
// contract (status codes, headers, bodies, no undocumented fields). Only tests import it.
package apitest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Transport validates every response it carries against Doc and fails the test on a mismatch.
type Transport struct {
	T      testing.TB
	Base   http.RoundTripper
	router routers.Router

	validated atomic.Int64
}

// NewTransport returns a validating transport for doc, which is left unchanged.
func NewTransport(t testing.TB, doc *openapi3.T, base http.RoundTripper) *Transport {
	t.Helper()
	clone := *doc
	clone.Servers = nil // match paths on any host, such as an httptest server
	r, err := gorillamux.NewRouter(&clone)
	if err != nil {
		t.Fatalf("apitest: router: %v", err)
	}
	return &Transport{T: t, Base: cmp.Or(base, http.DefaultTransport), router: r}
}

// Validated is how many responses were checked.
func (v *Transport) Validated() int { return int(v.validated.Load()) }

// RoundTrip implements http.RoundTripper.
func (v *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := v.Base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := v.check(req, resp, body); err != nil {
		v.T.Errorf("apitest: %s %s answered %d, which the spec does not allow: %v\nbody: %s", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
	return resp, nil
}

func (v *Transport) check(req *http.Request, resp *http.Response, body []byte) error {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("no route in the spec: %w", err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return err
	}
	v.validated.Add(1)
	return nil
}
