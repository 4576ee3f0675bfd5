package loader

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/wire"
)

// Array is a history array decoded where it lies in a larger document
// (see DecodeArray).
type Array struct {
	// Messages are the decoded messages. Their Part.Args alias the data
	// decoded.
	Messages facts.History
	// Elements holds each message's bytes in the data decoded.
	Elements [][]byte
	// End is the offset in the data just past the array's ']'.
	End int
}

// DecodeArray decodes the JSON array of messages that data begins with
// (after any whitespace) and stops after its ']': what follows it, such as
// the other members of a request body, is not decoded. The messages are
// those DecodeHistory decodes from the array's bytes, data[:End], and so
// are the errors, save one: when the array is longer than lim.MaxBytes
// and also holds a fault, the fault may be reported instead of the size.
// A syntax error's Offset counts in data.
//
// With workers above one, that many goroutines decode the array: the
// first from its start, each other from the first message it finds after
// its share of data begins. A message boundary is recognised only where a
// goroutine that decoded every message before it arrives: when the other
// goroutine's guess was not a boundary (a "},{" inside a string or a
// tool's arguments), its work is dropped and the messages are decoded
// again from there, so the result never depends on the guess. Data after
// the array is searched too, so the guesses pay best when the array is
// most of data. Every goroutine has ended when DecodeArray returns. The
// slices of messages start with room for one per KiB of data, into which
// the later goroutines' messages are appended.
func DecodeArray(file string, data []byte, lim Limits, workers int) (Array, error) {
	workers = max(workers, 1)
	ps := make([]*piece, workers)
	var abandon atomic.Bool
	for k := range ps {
		p := &piece{guess: k * len(data) / workers, next: k + 1, done: make(chan struct{})}
		// Room for a message per KiB: the messages of a history are
		// seldom smaller (a thousand generated ones average 1.1 KB), and
		// a wrong guess costs at most 8% of the bytes counted. The first
		// piece counts all of data, since the later pieces' messages are
		// appended to its own; each later one, its share.
		share := len(data)
		if k > 0 {
			share /= workers
		}
		p.msgs, p.elems = make(facts.History, 0, share>>10), make([][]byte, 0, share>>10)
		p.d = historyDecoder{Scanner: wire.Scanner{Data: data, File: file, MaxDepth: lim.depth()}, lim: lim}
		if k > 0 {
			// A later piece does not know its messages' places: the
			// limits that count them are checked on the whole.
			p.d.lim.MaxMessages, p.d.lim.MaxParts = 0, 0
		}
		ps[k] = p
	}
	var wg sync.WaitGroup
	for k := 1; k < workers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps[k].run(ps, k, &abandon)
		}()
	}
	ps[0].run(ps, 0, &abandon)
	abandon.Store(true)
	wg.Wait()

	first := ps[0]
	if first.err != nil {
		return Array{}, first.err
	}
	chain := []*piece{first}
	for p := first; p.handoff >= 0; p = ps[p.handoff] {
		chain = append(chain, ps[p.handoff])
	}
	a := Array{Messages: first.msgs, Elements: first.elems, End: chain[len(chain)-1].end}
	for _, p := range chain[1:] {
		// Into the first piece's room, which counted all of data.
		a.Messages = append(a.Messages, p.msgs...)
		a.Elements = append(a.Elements, p.elems...)
	}
	if a.Messages == nil {
		a.Messages = facts.History{}
	}
	parts := 0
	for i := range a.Messages {
		parts += len(a.Messages[i].Parts)
	}
	if workers > 1 && ((lim.MaxMessages > 0 && len(a.Messages) > lim.MaxMessages) ||
		(lim.MaxParts > 0 && parts > lim.MaxParts)) {
		// Which limit a whole decode meets first, and where, is its own.
		return DecodeArray(file, data, lim, 1)
	}
	if lim.MaxBytes > 0 && int64(a.End) > lim.MaxBytes {
		return Array{}, overBytes(file, a.End, lim.MaxBytes)
	}
	return a, nil
}

// piece is one goroutine's share of a DecodeArray.
type piece struct {
	d     historyDecoder
	guess int // where its search for a first message begins
	start int // where its first message begins (pieces after the first)
	// next is the first later piece it has not yet ruled out handing on to.
	next  int
	msgs  facts.History
	elems [][]byte
	// handoff is the piece whose messages follow its last one, or -1 when
	// its last message is the array's (end is then just past the ']').
	handoff, end int
	err          *Error // also set when a later piece found nothing, or gave up
	done         chan struct{}
}

// run decodes the piece's messages. The first piece reads the array from
// its '['; each later one from the first message it finds. Each stops at
// the array's ']', on an error, or at a message boundary where a later
// piece that decoded from there without error began.
func (p *piece) run(ps []*piece, k int, abandon *atomic.Bool) {
	defer close(p.done)
	d := &p.d
	if k == 0 {
		if d.Peek() != '[' {
			if _, err := d.SkipValue(); err != nil {
				p.err = err
				return
			}
			p.err = d.Fail(KindSchema, "a history must be an array of messages")
			return
		}
		d.I++
		if d.Peek() == ']' {
			d.I++
			p.handoff, p.end = -1, d.I
			return
		}
		if p.err = d.Enter(); p.err != nil {
			return
		}
	} else if !p.find(len(ps), abandon) {
		p.err = &Error{Msg: "no message found"}
		return
	}
	for i := 0; ; i++ {
		d.WS()
		at := d.I
		for p.next < len(ps) && at >= ps[p.next].guess {
			q := ps[p.next]
			<-q.done
			if q.err == nil && q.start == at {
				p.handoff = p.next
				return
			}
			p.next++
		}
		if k > 0 && abandon.Load() {
			p.err = &Error{Msg: "abandoned"}
			return
		}
		d.Path, d.Names = append(d.Path[:0], wire.Seg{Idx: i}), d.Names[:0]
		if d.lim.MaxMessages > 0 && i >= d.lim.MaxMessages {
			p.err = d.Fail(KindLimit, "more than %d messages", d.lim.MaxMessages)
			return
		}
		m, err := d.message()
		if err != nil {
			p.err = err
			return
		}
		p.msgs = append(p.msgs, m)
		p.elems = append(p.elems, d.Data[at:d.I])
		d.Path = d.Path[:0]
		closed, err := d.AfterElement()
		if err != nil {
			p.err = err
			return
		}
		if closed {
			p.handoff, p.end = -1, d.I
			return
		}
	}
}

// maxTries bounds the places find tries a message at.
const maxTries = 64

// find looks for the piece's first message from its guess on: a '{' that
// follows "}," (whitespace aside), where a message decodes and is followed
// by ',' or ']'. It leaves the scanner there, as inside the array. Failed
// tries may read at most a piece's share of bytes between them, and there
// may be at most maxTries of them: a syntax error costs a count of the
// lines before it, and input made of "},{" would otherwise pay that for
// every one.
func (p *piece) find(pieces int, abandon *atomic.Bool) bool {
	d := &p.d
	data := d.Data
	budget := len(data) / pieces
	tries := 0
	for pos := p.guess; pos < len(data) && budget > 0 && tries < maxTries && !abandon.Load(); {
		j := bytes.IndexByte(data[pos:], '{')
		if j < 0 {
			return false
		}
		c := pos + j
		pos = c + 1
		if !wire.FollowsObject(data, c) {
			continue
		}
		tries++
		d.I, d.Depth = c, 1
		d.Path, d.Names = append(d.Path[:0], wire.Seg{Idx: 0}), d.Names[:0]
		_, err := d.message()
		if err == nil {
			if sep := d.Peek(); sep == ',' || sep == ']' {
				p.start = c
				d.I, d.Depth, d.Extended = c, 1, false
				return true
			}
		}
		budget -= d.I - c
	}
	return false
}
