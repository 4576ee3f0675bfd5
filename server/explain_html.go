package server

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/output/explainpage"
	"github.com/policycheck/policycheck/internal/output/render"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server/internal/httpreq"
)

// Media types /v1/explain answers in: the explanation, or, for a client
// that prefers HTML (Accept: text/html), the page of policycheck explain
// --format html.
const (
	mediaJSON = "application/json"
	mediaHTML = "text/html"
)

// explainMedia is the media type the request's Accept header prefers, or
// a 406 for one that accepts neither.
func explainMedia(r *http.Request) (string, *Error) {
	mt, no := httpreq.Preferred(r.Header, mediaJSON, mediaHTML)
	if no != nil {
		return "", &Error{Status: http.StatusNotAcceptable, Code: CodeNotAcceptable, Message: no.Msg + " (/v1/explain answers application/json or text/html)"}
	}
	return mt, nil
}

// htmlPage is an answer written as an HTML page rather than JSON.
type htmlPage []byte

// explainPage renders x, explained from history (the body's history
// member), as a page: the loader reads the history's transcript
// (loader.DecodeTranscript), under the limits its decode just passed.
func explainPage(x *engine.Explanation, history []byte, lim loader.Limits) (htmlPage, *Error) {
	t, err := loader.DecodeTranscript("request", history, lim)
	if err != nil {
		return nil, &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "explain page: " + err.Error()}
	}
	var buf bytes.Buffer
	if err := render.Write(&buf, render.HTML, &render.Doc{Explanation: x, Transcript: t}); err != nil {
		return nil, &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
	}
	return htmlPage(buf.Bytes()), nil
}

func (p htmlPage) write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", explainpage.CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(p)))
	h.Set("Vary", "Accept")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(p)
}
