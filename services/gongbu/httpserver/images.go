package httpserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/preview"
)

// GetOperationImage serves the image Gongbu keeps for an operation to whom may read the
// operation. An image never changes, so its digest is a strong ETag, and http.ServeContent
// answers If-None-Match (304) and Range.
func (s *Server) GetOperationImage(w http.ResponseWriter, r *http.Request, handle string, params gongbuapi.GetOperationImageParams) {
	// Hubu reads any operation's image with its service credential, for its operators (hubuctl
	// image, the console); anyone else needs Hubu's word that the token may read the operation.
	if s.requireService(r) != nil {
		if err := s.requireOwner(r, handle); err != nil {
			s.writeError(w, r, err)
			return
		}
	} else if !contract.IsPublicHandle(handle) {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "public_handle must look like hubu:public-operation:v1:<uuid>"))
		return
	}
	var (
		img    gongbu.Image
		digest [sha256.Size]byte
		err    error
	)
	if params.Preview != nil && *params.Preview {
		var p gongbu.Preview
		p, digest, err = s.Executions.Store.PreviewByHandle(r.Context(), handle)
		img = gongbu.Image{MIMEType: preview.MIMEType, Bytes: p.Bytes}
	} else {
		img, digest, err = s.Executions.Store.ImageByHandle(r.Context(), handle)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", img.MIMEType)
	h.Set("ETag", `"`+hex.EncodeToString(digest[:])+`"`)
	h.Set("Cache-Control", "private, max-age=86400, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(&rangeRefusal{ResponseWriter: w}, r, "", time.Time{}, bytes.NewReader(img.Bytes))
}

// rangeRefusal turns http.ServeContent's answer to a Range it cannot serve (416, as plain
// text) into a problem with a stable code, as every other refusal is; the Content-Range it
// sets for a Range past the image's end (the image's size) stays.
type rangeRefusal struct {
	http.ResponseWriter
	refused bool
}

func (w *rangeRefusal) WriteHeader(status int) {
	if status != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.refused = true
	w.Header().Del("Content-Length")
	httpjson.WriteProblem(w.ResponseWriter, status, string(gongbu.CodeInvalidArguments),
		"the Range header is malformed or asks for no byte of the image")
}

func (w *rangeRefusal) Write(b []byte) (int, error) {
	if w.refused {
		return len(b), nil // ServeContent's plain-text message, already replaced
	}
	return w.ResponseWriter.Write(b)
}
