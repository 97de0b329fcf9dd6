package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/kit/netguard"
	"hubu.dev/hubu/proto/contract"
)

// ImageClient is the client the router downloads generated images with. An image URL comes
// from the provider by way of Gongbu, so it is not trusted to point somewhere harmless: unless
// allowPrivate, the client connects to no address of the IANA special-purpose ranges
// (kit/netguard: loopback, private, link-local, CGNAT, benchmarking, multicast, ...), judged on
// the address it dials so that no DNS answer can steer it there. It follows redirects only on
// the same scheme and host. logger (nil is silent) is told of every refusal.
func ImageClient(allowPrivate bool, timeout time.Duration, logger *slog.Logger) *http.Client {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = netguard.Control
	}
	transport := httpjson.PooledTransport()
	// Through a proxy the address dialed is the proxy's, and the guard would judge nothing.
	transport.Proxy = nil
	transport.DialContext = dialer.DialContext
	return &http.Client{
		Transport:     httpjson.Timeout(&refusalLog{next: transport, logger: logger}, timeout),
		CheckRedirect: sameHostRedirect(logger),
	}
}

// sameHostRedirect follows at most a few redirects, each on the first request's scheme and
// host: the guard vouches for addresses, not for wherever a host chooses to send us.
func sameHostRedirect(logger *slog.Logger) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Scheme != first.Scheme || !strings.EqualFold(req.URL.Host, first.Host) {
			logger.WarnContext(req.Context(), "image download refused: a redirect to another host", "host", first.Host, "to", req.URL.Host)
			return fmt.Errorf("image download refused: %s redirected to another host (%s)", first.Host, req.URL.Host)
		}
		if len(via) >= 5 {
			return errors.New("image download refused: too many redirects")
		}
		return nil
	}
}

// refusalLog logs the guard's refusals, which an operator may need to see (a local stack
// without AllowPrivateImageHosts, say); other failures are the usual transient ones.
type refusalLog struct {
	next   http.RoundTripper
	logger *slog.Logger
}

func (t *refusalLog) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	var refused *netguard.RefusedError
	if errors.As(err, &refused) {
		t.logger.WarnContext(r.Context(), "image download refused", "host", r.URL.Host, "reason", refused.Error())
	}
	return resp, err
}

// fetchImage downloads a small image to embed it; a larger one, one that could not be
// downloaded, or one that is not a PNG, JPEG or WebP image of the type it declares (what
// Gongbu keeps: an SVG can carry script) is only linked, and img is nil.
func (r *Router) fetchImage(ctx context.Context, url string) (img []byte, mimeType string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, ""
	}
	resp, err := r.cfg.Images.Do(req)
	if err != nil {
		return nil, ""
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(mt, "image/") {
		return nil, ""
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, r.cfg.ImageLimit+1))
	if err != nil || int64(len(b)) > r.cfg.ImageLimit {
		return nil, mt
	}
	if err := contract.CheckImage(mt, b); err != nil {
		r.cfg.Logger.WarnContext(ctx, "image download refused", "host", req.URL.Host, "reason", err.Error())
		return nil, ""
	}
	return b, mt
}
