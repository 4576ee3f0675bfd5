// Package sessionstore holds the gateway's session histories where every
// replica of a gateway reads them: in the process (Memory, the default)
// or in Redis, one server or a Redis Cluster (Redis). A history is a
// list of entries appended with a
// check of its length, so that two replicas serving one session at once
// never lose or reorder a message; a lease serializes the calls of a
// session across replicas; idle sessions expire after the TTL, and
// Delete drops one at once (its MCP session ended); a session marked
// lost ends the TTL after its mark, whatever is loaded meanwhile; a
// session past MaxBytes refuses appends; Claim makes an approval single
// use.
package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Entry is one message of a session's history as stored: the message's
// JSON and the note its owner keeps beside it (what a replica that did
// not write the message needs to derive it as its writer did).
type Entry struct {
	Note string
	Msg  []byte
}

// State is what Load found.
type State struct {
	// Len is the number of entries the store holds for the session.
	Len int
	// Lost is true when a replica marked the session lost (MarkLost):
	// the store once lost its history. LostAt is when (the first mark,
	// the same for every replica): the session, its mark with it,
	// expires the TTL after it, however often it is loaded or opened
	// meanwhile.
	Lost   bool
	LostAt time.Time
}

// Store is a session store. Keys are opaque strings; every method is
// safe for concurrent use.
type Store interface {
	// Open returns the session's public id: id when the session is new
	// (it is recorded), else the one recorded.
	Open(ctx context.Context, key, id string) (string, error)
	// Load returns the entries from index from on, and the state.
	// When State.Len < from the store lost entries the caller saw. It
	// renews the session's TTL, unless the session is lost (as Open and
	// Append do).
	Load(ctx context.Context, key string, from int) ([]Entry, State, error)
	// Append appends entries when the history holds exactly at entries:
	// else ErrConflict (another replica appended first); ErrTooLarge when
	// the history would pass MaxBytes. Each append renews the TTL.
	Append(ctx context.Context, key string, at int, entries ...Entry) error
	// MarkLost records that the session's history was lost, now, and
	// returns since when it is lost: now, or the time of the first mark
	// when it was marked already (a later mark neither moves nor renews
	// it). The session ends the TTL after that time.
	MarkLost(ctx context.Context, key string) (since time.Time, err error)
	// Lock takes the session's lease, waiting at most Options.LockWait
	// (ErrBusy); release gives it back. The lease is renewed while held.
	Lock(ctx context.Context, key string) (release func(), err error)
	// Claim records what (within the session) as used: true the first
	// time across every replica, false after.
	Claim(ctx context.Context, key, what string) (bool, error)
	// Lookup returns the key of the session with public id id.
	Lookup(ctx context.Context, id string) (key string, ok bool, err error)
	// Delete drops the session: its history, its public id and its
	// mark of loss, so that Lookup no longer finds it and the key's next
	// Open starts an empty session. Its claims are kept until they
	// expire (an approval used once stays used). A replica that held
	// the session derived finds it shorter than it saw (Load) and fails
	// it closed as lost.
	Delete(ctx context.Context, key string) error
	// Close releases the store's connections.
	Close() error
}

// Errors the stores return.
var (
	ErrConflict = errors.New("the session's history changed on another replica")
	ErrTooLarge = errors.New("the session's history is at its size limit")
	ErrBusy     = errors.New("another call of the session is still running")
)

// Options bound a store.
type Options struct {
	// TTL is how long an idle session is kept (default 1h).
	TTL time.Duration
	// MaxBytes bounds a session's history (its messages' bytes, default
	// 64 MiB).
	MaxBytes int64
	// Lease is how long a lease lasts unless renewed (default 10s); a
	// replica that stops holding one frees the session after it.
	Lease time.Duration
	// LockWait bounds how long Lock waits (default 2m).
	LockWait time.Duration
	// Warn, when not nil, is told what the store opened despite: a
	// Redis Cluster seed that does not answer while another does.
	Warn func(msg string)
}

func (o *Options) defaults() {
	if o.TTL <= 0 {
		o.TTL = time.Hour
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 64 << 20
	}
	if o.Lease <= 0 {
		o.Lease = 10 * time.Second
	}
	if o.LockWait <= 0 {
		o.LockWait = 2 * time.Minute
	}
}

// Open opens the store a --session-store value names: "memory",
// redis://HOST:PORT/DB (rediss:// for TLS) or
// redis+cluster://HOST:PORT[?addr=HOST:PORT...] (rediss+cluster:// for
// TLS).
func Open(ctx context.Context, spec string, o Options) (Store, error) {
	switch {
	case spec == "" || spec == "memory":
		return NewMemory(o), nil
	case strings.HasPrefix(spec, "redis://"), strings.HasPrefix(spec, "rediss://"):
		return NewRedis(ctx, spec, o)
	case strings.HasPrefix(spec, "redis+cluster://"), strings.HasPrefix(spec, "rediss+cluster://"):
		return NewRedisCluster(ctx, spec, o)
	}
	// The value is repeated without its password, if it is a URL that
	// holds one.
	shown := "the value"
	if u, err := url.Parse(spec); err == nil {
		shown = fmt.Sprintf("%q", u.Redacted())
	}
	return nil, fmt.Errorf("--session-store %s: want memory, redis://HOST:PORT/DB or redis+cluster://HOST:PORT", shown)
}

// size is the bytes entries count for against MaxBytes.
func size(entries []Entry) int64 {
	var n int64
	for _, e := range entries {
		n += int64(len(e.Msg))
	}
	return n
}

// wait sleeps before the next try of a lock, or returns ctx's error.
func wait(ctx context.Context, try int) error {
	d := time.Duration(min(1+try, 20)) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
