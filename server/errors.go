package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// Error codes of the JSON error document. The values are stable.
const (
	CodeSyntax           = "syntax"                 // the body or a part of it is not well-formed JSON
	CodeSchema           = "schema"                 // well-formed, but breaks a rule of the format
	CodeLimit            = "limit"                  // over a configured limit (413)
	CodeBadRegistry      = "bad_registry"           // the request's registry does not load
	CodeRegistryRequired = "registry_required"      // no registry in the request and none configured
	CodePolicy           = "policy_error"           // the policies do not compile against the request's registry
	CodeMethod           = "method_not_allowed"     // 405
	CodeNotFound         = "not_found"              // 404
	CodeUnauthorized     = "unauthorized"           // 401
	CodeNotReady         = "not_ready"              // 503: policies are not loaded yet
	CodeRunConflict      = "run_conflict"           // 409: resend the whole history with offset 0
	CodeInternal         = "internal"               // 500
	CodeBodyTimeout      = "body_timeout"           // 408: the body did not arrive in time
	CodeQuery            = "query"                  // a query parameter the endpoint does not read
	CodeEncoding         = "unsupported_encoding"   // 415: a Content-Encoding other than gzip
	CodeMediaType        = "unsupported_media_type" // 415: a Content-Type other than JSON (see README)
	CodeBrowser          = "browser_request"        // 403: a request a web page made (Origin, Sec-Fetch-Site)
	CodeNotAcceptable    = "not_acceptable"         // 406: an Accept header that accepts no type the endpoint answers in
)

// Error is the body of every error response:
// {"error": {"code": …, "message": …, "pointer": …}}. Pointer is the JSON
// pointer (RFC 6901) into the request body of the offending value, when
// there is one.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Pointer string `json:"pointer,omitempty"`
	// HistoryPointer is, on the incremental endpoint, the pointer of the
	// offending value in the whole history (messages counted from 0).
	HistoryPointer string `json:"history_pointer,omitempty"`
}

func (e *Error) Error() string {
	if e.Pointer != "" {
		return e.Code + ": " + e.Pointer + ": " + e.Message
	}
	return e.Code + ": " + e.Message
}

// writeError writes e as {"error": e}, as writeJSON writes a decision:
// a client reads both alike, and a message quoting "<stdin>" keeps its
// angle brackets rather than escaping them for HTML.
func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.Status, struct {
		Error *Error `json:"error"`
	}{e})
}

func badRequest(code, msg, ptr string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Message: msg, Pointer: ptr}
}

// fromLoader turns a loader error about the document at prefix (a JSON
// pointer into the request body) into an HTTP error.
func fromLoader(err error, prefix string) *Error {
	var le *loader.Error
	if errors.As(err, &le) {
		e := badRequest(string(le.Kind), le.Msg, prefix+le.Pointer)
		switch le.Kind {
		case loader.KindLimit:
			e.Status = http.StatusRequestEntityTooLarge
		case loader.KindSyntax, loader.KindSchema:
		default:
			e.Code = CodeSchema
		}
		return e
	}
	var re *facts.RegistryError
	if errors.As(err, &re) {
		return badRequest(CodeBadRegistry, re.Msg, prefix+re.Pointer)
	}
	return badRequest(CodeSchema, err.Error(), prefix)
}

// fromRegistry turns a registry load error into an HTTP error.
func fromRegistry(err error) *Error {
	e := fromLoader(err, "/registry")
	e.Code = CodeBadRegistry
	return e
}

// fromPolicy turns an engine construction error into an HTTP error.
func fromPolicy(err error) *Error {
	var pe *engine.PolicyError
	if errors.As(err, &pe) {
		return badRequest(CodePolicy, pe.Error(), "")
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}

// shiftPointer rewrites a pointer into the whole history (messages counted
// from offset) into a pointer into the request's messages array.
func shiftPointer(ptr string, offset int) string {
	if ptr == "" || offset == 0 {
		return ptr
	}
	rest := strings.TrimPrefix(ptr, "/")
	first, tail, _ := strings.Cut(rest, "/")
	i, err := strconv.Atoi(first)
	if err != nil {
		return ptr
	}
	out := "/" + strconv.Itoa(i-offset)
	if tail != "" || strings.Contains(rest, "/") {
		out += "/" + tail
	}
	return out
}
