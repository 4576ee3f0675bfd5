package httpreq

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// Preferred returns which of offers (media types such as
// "application/json"; the first is the default) the request's Accept
// header prefers: the offer with the highest quality, the most specific
// range deciding an offer's quality (type/subtype over type/* over */*),
// ties going to the earlier offer. No Accept header prefers the first
// offer. A header that does not parse, or that accepts none of the
// offers, is refused (the sidecar answers 406) rather than answered in a
// type the client said it does not read.
func Preferred(h http.Header, offers ...string) (string, *Refusal) {
	values := h.Values("Accept")
	if len(values) == 0 {
		return offers[0], nil
	}
	type accepted struct {
		typ, sub string
		q        float64
	}
	var ranges []accepted
	for _, v := range values {
		for _, r := range strings.Split(v, ",") {
			if r = strings.TrimSpace(r); r == "" {
				continue
			}
			mt, params, err := mime.ParseMediaType(r)
			if err != nil {
				return "", refuse("Accept " + strconv.Quote(r) + " does not parse (" + err.Error() + ")")
			}
			typ, sub, ok := strings.Cut(mt, "/")
			if !ok || (typ == "*" && sub != "*") {
				return "", refuse("Accept " + strconv.Quote(r) + " is not a media range (type/subtype, type/* or */*)")
			}
			q := 1.0
			if s, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(s, 64); err != nil || q < 0 || q > 1 {
					return "", refuse("Accept " + strconv.Quote(r) + " has a quality that is not a number from 0 to 1")
				}
			}
			ranges = append(ranges, accepted{typ, sub, q})
		}
	}
	if len(ranges) == 0 {
		return offers[0], nil
	}
	best, bestQ := "", 0.0
	for _, o := range offers {
		typ, sub, _ := strings.Cut(o, "/")
		q, spec := 0.0, 0
		for _, r := range ranges {
			s := 0
			switch {
			case r.typ == typ && r.sub == sub:
				s = 3
			case r.typ == typ && r.sub == "*":
				s = 2
			case r.typ == "*":
				s = 1
			}
			if s > spec {
				q, spec = r.q, s
			}
		}
		if q > bestQ {
			best, bestQ = o, q
		}
	}
	if best == "" {
		return "", refuse("Accept " + strconv.Quote(strings.Join(values, ", ")) + " accepts none of " + strings.Join(offers, ", ") + ", the types this endpoint answers in")
	}
	return best, nil
}
