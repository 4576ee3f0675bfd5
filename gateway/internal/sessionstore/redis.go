package sessionstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a Store in a Redis server or a Redis Cluster, shared by every
// replica that names it. A session's keys (its entries, its meta hash,
// its lease, its claims) share one hash tag, so they live in one hash
// slot, on one node of a cluster; each history append is one Lua script
// that checks the length first, so that it is atomic on the server. The
// index of public ids (Lookup) is keyed by the id alone, so it lies in
// another slot: every script declares the keys it touches (KEYS) and
// touches one slot, as a cluster requires, and the index is written by
// commands of its own after the session's script (see "The index of
// public ids" below for what that gives up). The same commands run on
// one server and on a cluster. Safe for concurrent use.
type Redis struct {
	o Options
	// rc is a *redis.Client (one server) or a *redis.ClusterClient
	// (which follows a cluster's MOVED and ASK redirections).
	rc redis.UniversalClient
}

// NewRedis connects to the Redis server url names
// (redis://[user:password@]HOST:PORT/DB) and checks that it answers.
func NewRedis(ctx context.Context, url string, o Options) (*Redis, error) {
	o.defaults()
	u, err := neturl.Parse(url)
	if err != nil {
		// The URL is not repeated: it may hold a password.
		return nil, errors.New("--session-store: not a URL: want redis://HOST:PORT/DB")
	}
	if u.Hostname() == "" {
		// go-redis reads a URL without a host as 127.0.0.1:6379: a
		// replica configured with a typo would share its sessions with
		// whatever answers there.
		return nil, fmt.Errorf("--session-store %q names no Redis host: want redis://HOST:PORT/DB", u.Redacted())
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("--session-store: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := dial(pctx, opt.Addr); err != nil {
		return nil, err
	}
	rc := redis.NewClient(opt)
	info, err := rc.Info(pctx, "cluster").Result()
	if err != nil {
		_ = rc.Close()
		return nil, fmt.Errorf("--session-store %s: the Redis server does not answer: %w", opt.Addr, err)
	}
	if strings.Contains(info, "cluster_enabled:1") {
		// A cluster node answers MOVED for the keys of the other nodes'
		// slots: most sessions would fail.
		_ = rc.Close()
		return nil, fmt.Errorf("--session-store %s: the Redis server is a node of a Redis Cluster: name the cluster as redis+cluster://HOST:PORT", opt.Addr)
	}
	return &Redis{o: o, rc: rc}, nil
}

// dial makes one connection to addr and closes it: a server that is not
// there is said once, here, rather than through a client's pool retrying
// and logging each attempt on standard error.
func dial(ctx context.Context, addr string) error {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("--session-store %s: the Redis server does not answer: %w", addr, err)
	}
	if err := conn.Close(); err != nil {
		return fmt.Errorf("--session-store %s: closing the connection that checked it answers: %w", addr, err)
	}
	return nil
}

// clusterSchemes are the schemes of a cluster's URL and the scheme each
// stands for in go-redis's.
var clusterSchemes = map[string]string{"redis+cluster": "redis", "rediss+cluster": "rediss"}

// NewRedisCluster connects to the Redis Cluster url names
// (redis+cluster://[user:password@]HOST:PORT[?addr=HOST:PORT&addr=...],
// rediss+cluster:// for TLS; every address a seed of the cluster) and
// checks that every seed that answers is a node of a cluster whose state
// is ok. A seed that does not answer is told to Options.Warn when another
// does (a cluster is reached through any of its nodes: a gateway starts
// with one of them down), and refused when none does. A cluster has
// database 0 alone: a URL naming another, or an option other than addr,
// is refused.
func NewRedisCluster(ctx context.Context, url string, o Options) (*Redis, error) {
	o.defaults()
	const want = "want redis+cluster://HOST:PORT[?addr=HOST:PORT&addr=...]"
	u, err := neturl.Parse(url)
	if err != nil {
		// The URL is not repeated: it may hold a password.
		return nil, errors.New("--session-store: not a URL: " + want)
	}
	scheme, ok := clusterSchemes[u.Scheme]
	if !ok {
		return nil, fmt.Errorf("--session-store %q: not a cluster's URL: %s", u.Redacted(), want)
	}
	if u.Hostname() == "" {
		// go-redis reads a URL without a host as localhost:6379.
		return nil, fmt.Errorf("--session-store %q names no Redis host: %s", u.Redacted(), want)
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return nil, fmt.Errorf("--session-store %q names database %q: a Redis Cluster has database 0 alone (%s)", u.Redacted(), p, want)
	}
	for k := range u.Query() {
		if k != "addr" {
			return nil, fmt.Errorf("--session-store %q: unknown option %q: a cluster's URL takes addr=HOST:PORT alone (%s)", u.Redacted(), k, want)
		}
	}
	seed := *u
	seed.Scheme, seed.Path, seed.RawPath = scheme, "", ""
	opt, err := redis.ParseClusterURL(seed.String())
	if err != nil {
		return nil, fmt.Errorf("--session-store %q: %w", u.Redacted(), err)
	}
	if opt.TLSConfig != nil {
		opt.TLSConfig.MinVersion = tls.VersionTLS12
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var silent []error // the seeds that do not answer
	for _, addr := range opt.Addrs {
		if err := dial(pctx, addr); err != nil {
			silent = append(silent, err)
			continue
		}
		if err := clusterSeed(pctx, addr, opt); err != nil {
			return nil, err
		}
	}
	if len(silent) == len(opt.Addrs) {
		return nil, silent[0]
	}
	for _, err := range silent {
		if o.Warn != nil {
			o.Warn(err.Error() + "; the cluster is reached through the seeds that do")
		}
	}
	rc := redis.NewClusterClient(opt)
	if err := rc.Ping(pctx).Err(); err != nil {
		_ = rc.Close()
		return nil, fmt.Errorf("--session-store %s: the Redis Cluster does not answer: %w", opt.Addrs[0], err)
	}
	return &Redis{o: o, rc: rc}, nil
}

// clusterSeed checks that the seed at addr, which answers, is a node of
// a cluster whose state is ok.
func clusterSeed(ctx context.Context, addr string, opt *redis.ClusterOptions) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Username: opt.Username, Password: opt.Password, TLSConfig: opt.TLSConfig, MaxRetries: -1})
	defer c.Close()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Errorf("--session-store %s: not a node of a Redis Cluster: %w", addr, err)
	}
	if !strings.Contains(info, "cluster_state:ok\r\n") {
		state, _, _ := strings.Cut(info, "\r\n")
		return fmt.Errorf("--session-store %s: the Redis Cluster is not ready (%s)", addr, state)
	}
	return nil
}

// sessionKeys are a session's Redis keys: its entries (a list), its
// meta hash (id, bytes, lost: the time of the lost mark, Unix
// milliseconds) and its lease; its claims are the meta hash's name and
// a suffix. They share one hash tag: one slot, one node of a cluster.
func sessionKeys(key string) (list, meta, lease string) {
	sum := sha256.Sum256([]byte(key))
	tag := "{" + hex.EncodeToString(sum[:16]) + "}"
	return "policycheck:gw:" + tag + ":h", "policycheck:gw:" + tag + ":m", "policycheck:gw:" + tag + ":l"
}

// idKey is the index of the public id id: the key of its session. It
// is keyed by the id alone (Lookup knows nothing else), so on a cluster
// it lies in another slot than its session's keys.
func idKey(id string) string { return "policycheck:gw:id:" + id }

// An entry is stored as its note, a NUL, its message (JSON holds no raw
// NUL, nor does a note).
func encode(e Entry) []byte {
	b := make([]byte, 0, len(e.Note)+1+len(e.Msg))
	b = append(b, e.Note...)
	b = append(b, 0)
	return append(b, e.Msg...)
}

func decode(s string) (Entry, error) {
	b := []byte(s)
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return Entry{}, errors.New("a stored entry has no note")
	}
	return Entry{Note: string(b[:i]), Msg: b[i+1:]}, nil
}

// The index of public ids. A script touches one hash slot, and an id's
// index (idKey) is not in its session's: each operation runs the
// session's script, then writes the index with a command of its own,
// keyed on the index alone. Two things follow, and neither lets Lookup
// name a session the id was not issued for:
//
//   - The index may be missing while its session exists: between an
//     Open's script (which records the id in the session's meta hash)
//     and its SET of the index, or when that SET or a renewal failed
//     (the caller got the error). Lookup then answers not found, which
//     the gateway takes as an id this replica may still hold (its
//     history endpoint answers from the replica's own table, else 404
//     "no such session"); nothing is decided on Lookup. Open returns
//     only after the index is written, so an id a replica published (in
//     its decision log, SessionIDs) is indexed already. Open, Load and
//     MarkLost SET the index (they do not only renew it), so the
//     session's next use writes a missing index again.
//   - The index may outlive its session by at most a TTL: an Open that
//     read the id before a Delete writes the index after it, a Load or
//     MarkLost renews it after the session ended. Lookup checks that the
//     key it names still records this id (HGET of the meta hash), so an
//     index left behind answers not found, even after the key's next
//     session began under another id.
//
// On one server the same commands run: one code path, at one more round
// trip for Open, Load and MarkLost than a single script would take.

// openScript: KEYS meta; ARGV id, ttl ms. It records id unless the
// session has one, and returns the id and how long its index is to last:
// the TTL, or what is left of a lost session's (which is not renewed: it
// ends the TTL after its mark, and its id with it).
var openScript = redis.NewScript(`
local lost = redis.call('HGET', KEYS[1], 'lost')
local ttl = tonumber(ARGV[2])
if lost then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then ttl = left end
end
local id = redis.call('HGET', KEYS[1], 'id')
if not id then
  id = ARGV[1]
  redis.call('HSET', KEYS[1], 'id', id)
end
if not lost then redis.call('PEXPIRE', KEYS[1], ttl) end
return {id, ttl}
`)

// Open implements Store: the session's script, then the SET of its id's
// index, whether this call recorded the id or another did (which renews
// it, and writes it again if a failure left it missing).
func (r *Redis) Open(ctx context.Context, key, id string) (string, error) {
	_, meta, _ := sessionKeys(key)
	res, err := openScript.Run(ctx, r.rc, []string{meta}, id, r.o.TTL.Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("the session store: %w", err)
	}
	if len(res) != 2 {
		return "", errors.New("the session store answered an open without an id")
	}
	got, _ := res[0].(string)
	ttl, _ := res[1].(int64)
	if got == "" || ttl <= 0 {
		return "", errors.New("the session store answered an open without an id")
	}
	if err := r.rc.Set(ctx, idKey(got), key, time.Duration(ttl)*time.Millisecond).Err(); err != nil {
		return "", fmt.Errorf("the session store: indexing the session's id: %w", err)
	}
	return got, nil
}

// loadScript: KEYS list, meta; ARGV from, ttl ms. It answers the
// length, the time of the lost mark (Unix milliseconds; 0: not lost),
// the id whose index is to be renewed ("": none) and the entries from
// from on. A lost session is not renewed: it ends the TTL after its
// mark.
var loadScript = redis.NewScript(`
local n = redis.call('LLEN', KEYS[1])
local lost = redis.call('HGET', KEYS[2], 'lost')
local renew = ''
if not lost then
  renew = redis.call('HGET', KEYS[2], 'id') or ''
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
local from = tonumber(ARGV[1])
local out = {n, lost and (tonumber(lost) or 1) or 0, renew}
if from < n then
  local es = redis.call('LRANGE', KEYS[1], from, -1)
  for i = 1, #es do out[#out + 1] = es[i] end
end
return out
`)

// Load implements Store. It renews the session's TTL unless it is lost:
// its keys in the script, its id's index after it (a SET, which writes
// it again if it went missing).
func (r *Redis) Load(ctx context.Context, key string, from int) ([]Entry, State, error) {
	list, meta, _ := sessionKeys(key)
	res, err := loadScript.Run(ctx, r.rc, []string{list, meta}, from, r.o.TTL.Milliseconds()).Slice()
	if err != nil {
		return nil, State{}, fmt.Errorf("the session store: %w", err)
	}
	if len(res) < 3 {
		return nil, State{}, errors.New("the session store answered a short load")
	}
	n, _ := res[0].(int64)
	lost, _ := res[1].(int64)
	if renew, _ := res[2].(string); renew != "" {
		if err := r.rc.Set(ctx, idKey(renew), key, r.o.TTL).Err(); err != nil {
			return nil, State{}, fmt.Errorf("the session store: renewing the session's id: %w", err)
		}
	}
	st := State{Len: int(n), Lost: lost != 0}
	if st.Lost {
		// A mark without its time ("1", a replica before the time was
		// kept) is as old as can be: it has ended.
		st.LostAt = time.UnixMilli(lost)
	}
	var out []Entry
	for _, v := range res[3:] {
		s, ok := v.(string)
		if !ok {
			return nil, State{}, errors.New("the session store answered an entry that is not a string")
		}
		e, err := decode(s)
		if err != nil {
			return nil, State{}, err
		}
		out = append(out, e)
	}
	return out, st, nil
}

// appendScript: KEYS list, meta; ARGV at, ttl ms, max bytes, added bytes,
// entries...
var appendScript = redis.NewScript(`
local n = redis.call('LLEN', KEYS[1])
if n ~= tonumber(ARGV[1]) then return -1 end
local b = tonumber(redis.call('HGET', KEYS[2], 'bytes') or '0')
if b + tonumber(ARGV[4]) > tonumber(ARGV[3]) then return -2 end
for i = 5, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
redis.call('HINCRBY', KEYS[2], 'bytes', ARGV[4])
if redis.call('HEXISTS', KEYS[2], 'lost') == 1 then
  -- A lost session ends the TTL after its mark: its history with it.
  local left = redis.call('PTTL', KEYS[2])
  if left > 0 then redis.call('PEXPIRE', KEYS[1], left) end
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return n + #ARGV - 4
`)

// Append implements Store.
func (r *Redis) Append(ctx context.Context, key string, at int, entries ...Entry) error {
	list, meta, _ := sessionKeys(key)
	args := make([]any, 0, 4+len(entries))
	args = append(args, at, r.o.TTL.Milliseconds(), r.o.MaxBytes, size(entries))
	for _, e := range entries {
		args = append(args, encode(e))
	}
	n, err := appendScript.Run(ctx, r.rc, []string{list, meta}, args...).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("the session store: %w", err)
	case n == -1:
		return ErrConflict
	case n == -2:
		return ErrTooLarge
	}
	return nil
}

// markLostScript: KEYS meta, list; ARGV now (Unix milliseconds), ttl
// ms. The first mark is kept, and with it the session's end: the TTL
// after it. It answers the mark's time and, when this call marked it,
// the id whose index is to end with the session ("": none).
var markLostScript = redis.NewScript(`
local at = redis.call('HGET', KEYS[1], 'lost')
if at then return {tonumber(at) or 1, ''} end
redis.call('HSET', KEYS[1], 'lost', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {tonumber(ARGV[1]), redis.call('HGET', KEYS[1], 'id') or ''}
`)

// MarkLost implements Store: the script, then the id's index SET to end
// the TTL after the mark, as the session does.
func (r *Redis) MarkLost(ctx context.Context, key string) (time.Time, error) {
	list, meta, _ := sessionKeys(key)
	res, err := markLostScript.Run(ctx, r.rc, []string{meta, list}, time.Now().UnixMilli(), r.o.TTL.Milliseconds()).Slice()
	if err != nil {
		return time.Time{}, fmt.Errorf("the session store: %w", err)
	}
	if len(res) != 2 {
		return time.Time{}, errors.New("the session store answered a mark of loss without its time")
	}
	at, ok := res[0].(int64)
	if !ok {
		return time.Time{}, errors.New("the session store answered a mark of loss without its time")
	}
	if id, _ := res[1].(string); id != "" {
		if err := r.rc.Set(ctx, idKey(id), key, r.o.TTL).Err(); err != nil {
			return time.Time{}, fmt.Errorf("the session store: the lost session's id: %w", err)
		}
	}
	return time.UnixMilli(at), nil
}

var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)

// deleteIfScript: KEYS the key; ARGV a value. It deletes the key while
// it holds the value: a lease its holder gives back, an id's index that
// still names its session.
var deleteIfScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// Lock implements Store: SET NX with the lease's expiry, renewed every
// third of it while held. A replica that stops (SIGKILL, SIGSTOP) stops
// renewing: the lease ends within Options.Lease.
func (r *Redis) Lock(ctx context.Context, key string) (func(), error) {
	_, _, lease := sessionKeys(key)
	var b [12]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	deadline := time.Now().Add(r.o.LockWait)
	for try := 0; ; try++ {
		ok, err := r.rc.SetNX(ctx, lease, token, r.o.Lease).Result()
		if err != nil {
			return nil, fmt.Errorf("the session store: %w", err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return nil, ErrBusy
		}
		if err := wait(ctx, try); err != nil {
			return nil, err
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.o.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = renewScript.Run(context.Background(), r.rc, []string{lease}, token, r.o.Lease.Milliseconds()).Err()
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		_ = deleteIfScript.Run(context.Background(), r.rc, []string{lease}, token).Err()
	}, nil
}

// Claim implements Store: SET NX of the claim, kept for the TTL.
func (r *Redis) Claim(ctx context.Context, key, what string) (bool, error) {
	_, meta, _ := sessionKeys(key)
	sum := sha256.Sum256([]byte(what))
	ok, err := r.rc.SetNX(ctx, meta+":claim:"+hex.EncodeToString(sum[:]), "1", r.o.TTL).Result()
	if err != nil {
		return false, fmt.Errorf("the session store: %w", err)
	}
	return ok, nil
}

// Lookup implements Store: the id's index names a key, whose session
// must still record this id (an index may outlive its session: see "The
// index of public ids").
func (r *Redis) Lookup(ctx context.Context, id string) (string, bool, error) {
	key, err := r.rc.Get(ctx, idKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("the session store: %w", err)
	}
	_, meta, _ := sessionKeys(key)
	got, err := r.rc.HGet(ctx, meta, "id").Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("the session store: %w", err)
	}
	if got != id {
		return "", false, nil
	}
	return key, true, nil
}

// deleteScript: KEYS list, meta. It deletes both and answers the id the
// session recorded ("": none).
var deleteScript = redis.NewScript(`
local id = redis.call('HGET', KEYS[2], 'id') or ''
redis.call('DEL', KEYS[1], KEYS[2])
return id
`)

// Delete implements Store: one script deletes the history and the meta
// hash, then the id's index is deleted while it still names this
// session. The lease is left to expire (a replica holding it finds the
// history gone when it appends); claims expire with the TTL.
func (r *Redis) Delete(ctx context.Context, key string) error {
	list, meta, _ := sessionKeys(key)
	id, err := deleteScript.Run(ctx, r.rc, []string{list, meta}).Text()
	if err != nil {
		return fmt.Errorf("the session store: %w", err)
	}
	if id == "" {
		return nil
	}
	if err := deleteIfScript.Run(ctx, r.rc, []string{idKey(id)}, key).Err(); err != nil {
		return fmt.Errorf("the session store: deleting the session's id: %w", err)
	}
	return nil
}

// Close implements Store.
func (r *Redis) Close() error { return r.rc.Close() }

// Len is the stored length of key's history (tests).
func (r *Redis) Len(ctx context.Context, key string) (int, error) {
	list, _, _ := sessionKeys(key)
	n, err := r.rc.LLen(ctx, list).Result()
	return int(n), err
}
