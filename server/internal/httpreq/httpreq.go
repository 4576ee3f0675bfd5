// Package httpreq checks what an HTTP request says of its body and of its
// sender before a server reads it: the media type (JSON, or refused), the
// content coding (gzip, decompressed with its own errors told apart from
// the connection's, or refused), whether a web page sent it, and which of
// the types an endpoint answers in its Accept header prefers. It knows
// nothing of the documents the body holds; the sidecar (server/) turns
// its refusals into its error codes.
package httpreq

import (
	"compress/gzip"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// A Refusal is a request refused for what its headers say, with the
// sentence that says why.
type Refusal struct{ Msg string }

func (r *Refusal) Error() string { return r.Msg }

func refuse(msg string) *Refusal { return &Refusal{msg} }

// JSONBody refuses a request whose Content-Type says its body is not
// JSON. A body is JSON when it declares no type, a JSON type
// (application/json, or any type with the +json suffix of RFC 6839), or
// one of the labels clients put on a string sent without naming its type:
// text/plain (fetch, in browsers and Node) and
// application/x-www-form-urlencoded (curl -d). Any other type, YAML among
// them (OPA's server reads application/x-yaml), a charset other than
// UTF-8 (RFC 8259 allows no other), a type that does not parse or one
// sent twice is refused, rather than read as the JSON it says it is not.
func JSONBody(h http.Header) *Refusal {
	values := h.Values("Content-Type")
	switch len(values) {
	case 0:
		return nil
	case 1:
	default:
		return refuse("Content-Type is sent " + strconv.Itoa(len(values)) + " times")
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil {
		return refuse("Content-Type " + strconv.Quote(values[0]) + " does not parse (" + err.Error() + ")")
	}
	switch {
	case mt == "application/json", strings.HasSuffix(mt, "+json"),
		mt == "text/plain", mt == "application/x-www-form-urlencoded":
	case strings.Contains(mt, "yaml"):
		return refuse("Content-Type " + strconv.Quote(mt) + " is not read: YAML bodies are not read, send JSON")
	default:
		return refuse("Content-Type " + strconv.Quote(mt) + " is not read: send the body as JSON (application/json)")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return refuse("charset " + strconv.Quote(cs) + " is not read: JSON is UTF-8 (RFC 8259); send it so, with charset=utf-8 or none")
	}
	return nil
}

// Gzipped reads the Content-Encoding: false for none (or identity), true
// for gzip (or x-gzip, its old name); anything else, gzip applied twice
// among it, is refused, since the body would otherwise be read as the
// JSON it is not.
func Gzipped(h http.Header) (bool, *Refusal) {
	gz := false
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			switch c = strings.ToLower(strings.TrimSpace(c)); c {
			case "", "identity":
			case "gzip", "x-gzip":
				if gz {
					return false, encoding("gzip applied twice")
				}
				gz = true
			default:
				return false, encoding(strconv.Quote(c))
			}
		}
	}
	return gz, nil
}

func encoding(what string) *Refusal {
	return refuse("Content-Encoding " + what + " is not read: send the body as is, or compressed once with gzip")
}

// Gunzip returns body decompressed. Its errors of decompression (not
// those of the connection, its deadline or http.MaxBytesReader's limit,
// which keep their meaning) are *InflateErrors, from Gunzip itself when
// the gzip header does not read.
func Gunzip(body io.Reader) (io.Reader, error) {
	zr, err := gzip.NewReader(body)
	if err != nil {
		return nil, inflateError(err)
	}
	return gunzip{zr}, nil
}

type gunzip struct{ zr *gzip.Reader }

func (g gunzip) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF {
		err = inflateError(err)
	}
	return n, err
}

// An InflateError is a gzip body that does not decompress.
type InflateError struct{ Err error }

func (e *InflateError) Error() string { return "the gzip body does not decompress: " + e.Err.Error() }

func inflateError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // no gzip header at all
	}
	return &InflateError{err}
}

// FromWebPage refuses a request a web page made: one that carries an
// Origin header, or a Sec-Fetch-Site other than "none" (an address typed
// in the browser's own bar). HTTP clients of programs send neither; a page
// on any site, though, may make a browser post to a server on its host (a
// form, or fetch with a text/plain body, needs no CORS preflight), and a
// page whose name is made to resolve to 127.0.0.1 (DNS rebinding) may
// read its answers.
func FromWebPage(h http.Header) *Refusal {
	origin, site := h.Get("Origin"), h.Get("Sec-Fetch-Site")
	if origin == "" && (site == "" || site == "none") {
		return nil
	}
	what := "Origin " + strconv.Quote(origin)
	if origin == "" {
		what = "Sec-Fetch-Site " + strconv.Quote(site)
	}
	return refuse("a request made by a web page is refused (it came with " + what + "): the sidecar answers agents' HTTP clients, which send neither Origin nor Sec-Fetch-Site")
}
