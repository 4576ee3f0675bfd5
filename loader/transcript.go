package loader

import "github.com/policycheck/policycheck/facts"

// Transcript is a history as a person reads it: the decoded history and,
// beside each of its messages, what the message says that the facts model
// does not keep (its model and provider names, each part's text). The
// page of an explanation (policycheck explain --format html, the
// sidecar's text/html /v1/explain) draws the conversation from it, so
// that the history is read by its one decoder, not again.
type Transcript struct {
	// History is the history decoded, as DecodeHistory returns it.
	History facts.History
	// Messages are parallel to History.
	Messages []TranscriptMessage
}

// TranscriptMessage is what one message says beyond its facts.
type TranscriptMessage struct {
	// Model and Provider are the message's model_name and provider_name
	// ("" when absent, null or not a string).
	Model, Provider string
	// Texts are parallel to the message's parts: the raw JSON of what
	// each says, its content, else its args, tools_added or added (the
	// first present and not null; nil when none), as the history wrote it
	// (number extensions included). They alias the decoder's input.
	Texts [][]byte
}

// DecodeTranscript decodes a history as DecodeHistory does, keeping its
// Transcript. The transcript's texts alias data: data must not be
// modified while it is in use.
func DecodeTranscript(file string, data []byte, lim Limits) (*Transcript, error) {
	t := &Transcript{}
	h, err := decodeHistory(file, data, lim, t)
	if err != nil {
		return nil, err
	}
	t.History = h
	return t, nil
}

// ReadTranscript is Read keeping the history's Transcript.
func (r Reader) ReadTranscript(file string, data []byte) (*Transcript, error) {
	t, err := DecodeTranscript(file, data, r.Limits)
	if err != nil {
		return nil, err
	}
	if err := r.CheckSchema(file, data); err != nil {
		return nil, err
	}
	return t, nil
}
