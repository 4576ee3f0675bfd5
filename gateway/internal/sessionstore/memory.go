package sessionstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"
)

// Memory is a Store in the process: the default, for one gateway (or
// several Gateways in one process, which may share it).
type Memory struct {
	o   Options
	now func() time.Time

	mu       sync.Mutex
	sessions map[string]*memSession
	ids      map[string]string
	claims   map[string]time.Time
	swept    time.Time
}

type memSession struct {
	id         string
	entries    []Entry
	bytes      int64
	lostAt     time.Time // zero: not lost
	expires    time.Time
	lease      string
	leaseUntil time.Time
}

// NewMemory returns an empty Memory store.
func NewMemory(o Options) *Memory {
	o.defaults()
	return &Memory{o: o, now: time.Now, sessions: map[string]*memSession{}, ids: map[string]string{}, claims: map[string]time.Time{}}
}

// session returns key's session, nil when absent or expired; m.mu held.
func (m *Memory) session(key string, now time.Time) *memSession {
	m.sweep(now)
	s := m.sessions[key]
	if s == nil || now.After(s.expires) {
		return nil
	}
	return s
}

// sweep drops expired sessions and claims, at most once a minute.
func (m *Memory) sweep(now time.Time) {
	if now.Sub(m.swept) < time.Minute {
		return
	}
	m.swept = now
	for k, s := range m.sessions {
		if now.After(s.expires) {
			delete(m.sessions, k)
			delete(m.ids, s.id)
		}
	}
	for k, until := range m.claims {
		if now.After(until) {
			delete(m.claims, k)
		}
	}
}

// Open implements Store.
func (m *Memory) Open(_ context.Context, key, id string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if s := m.session(key, now); s != nil {
		if s.lostAt.IsZero() {
			s.expires = now.Add(m.o.TTL)
		}
		if s.id == "" {
			s.id = id
			m.ids[id] = key
		}
		return s.id, nil
	}
	if old := m.sessions[key]; old != nil {
		delete(m.ids, old.id)
	}
	m.sessions[key] = &memSession{id: id, expires: now.Add(m.o.TTL)}
	m.ids[id] = key
	return id, nil
}

// Load implements Store.
func (m *Memory) Load(_ context.Context, key string, from int) ([]Entry, State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	s := m.session(key, now)
	if s == nil {
		return nil, State{}, nil
	}
	st := State{Len: len(s.entries), Lost: !s.lostAt.IsZero(), LostAt: s.lostAt}
	if !st.Lost {
		// A lost session is not renewed: it ends the TTL after its mark.
		s.expires = now.Add(m.o.TTL)
	}
	if from >= len(s.entries) {
		return nil, st, nil
	}
	return slices.Clone(s.entries[from:]), st, nil
}

// Append implements Store.
func (m *Memory) Append(_ context.Context, key string, at int, entries ...Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	s := m.session(key, now)
	if s == nil {
		if at != 0 {
			return ErrConflict
		}
		s = &memSession{}
		m.sessions[key] = s
	}
	if len(s.entries) != at {
		return ErrConflict
	}
	add := size(entries)
	if s.bytes+add > m.o.MaxBytes {
		return ErrTooLarge
	}
	s.entries = append(s.entries, entries...)
	s.bytes += add
	if s.lostAt.IsZero() {
		s.expires = now.Add(m.o.TTL)
	}
	return nil
}

// MarkLost implements Store.
func (m *Memory) MarkLost(_ context.Context, key string) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	s := m.session(key, now)
	if s == nil {
		s = &memSession{}
		m.sessions[key] = s
	}
	if s.lostAt.IsZero() {
		// To the millisecond, as Redis keeps it.
		s.lostAt = time.UnixMilli(now.UnixMilli())
		s.expires = s.lostAt.Add(m.o.TTL)
	}
	return s.lostAt, nil
}

// Lock implements Store.
func (m *Memory) Lock(ctx context.Context, key string) (func(), error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	deadline := m.now().Add(m.o.LockWait)
	for try := 0; ; try++ {
		m.mu.Lock()
		now := m.now()
		s := m.session(key, now)
		if s == nil {
			s = &memSession{expires: now.Add(m.o.TTL)}
			m.sessions[key] = s
		}
		if s.lease == "" || now.After(s.leaseUntil) {
			// In one process a lease needs no renewal: it lasts until
			// released (the holder cannot stall apart from the store).
			s.lease, s.leaseUntil = token, now.Add(100*365*24*time.Hour)
			m.mu.Unlock()
			return func() {
				m.mu.Lock()
				defer m.mu.Unlock()
				if s.lease == token {
					s.lease = ""
				}
			}, nil
		}
		m.mu.Unlock()
		if now.After(deadline) {
			return nil, ErrBusy
		}
		if err := wait(ctx, try); err != nil {
			return nil, err
		}
	}
}

// Claim implements Store.
func (m *Memory) Claim(_ context.Context, key, what string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	k := key + "\x00" + what
	if until, ok := m.claims[k]; ok && !now.After(until) {
		return false, nil
	}
	m.claims[k] = now.Add(m.o.TTL)
	return true, nil
}

// Lookup implements Store.
func (m *Memory) Lookup(_ context.Context, id string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, ok := m.ids[id]
	if ok && m.session(key, m.now()) == nil {
		return "", false, nil
	}
	return key, ok, nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.sessions[key]; s != nil {
		if m.ids[s.id] == key {
			delete(m.ids, s.id)
		}
		delete(m.sessions, key)
	}
	return nil
}

// Close implements Store.
func (m *Memory) Close() error { return nil }

// Sessions is the number of sessions m holds that have not expired:
// what its memory grows with (tests count it).
func (m *Memory) Sessions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	n := 0
	for _, s := range m.sessions {
		if !now.After(s.expires) {
			n++
		}
	}
	return n
}
