//lint:file-ignore SA1019 the gateway relays logging, sampling and elicitation of protocol versions before 2026-07-28, which deprecates logging and sampling (SEP-2577).

package gateway

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// relay is a forwarded call's way back to the client that made it: the
// upstream's progress and log notifications during the call reach that
// client, and its elicitation and sampling requests are asked of that
// client when it declared the capability.
type relay struct {
	// ctx is the client's request's (its log level, its cancellation).
	ctx context.Context
	ss  *mcp.ServerSession
	// progressToken is the client's, nil when it sent none: the
	// upstream's progress is then not relayed.
	progressToken any
	// caps are the client's capabilities: elicitation and sampling are
	// relayed to a client that declared them.
	caps *clientCaps

	// mu guards last, when the latest notification was relayed.
	mu   sync.Mutex
	last time.Time
}

// Settling: the SDK's client hands an upstream's notifications to their
// handlers in order but apart from the call's result, so the last ones
// sent before the result may still be queued when the call returns. A
// call that relayed notifications waits until none came for settleQuiet,
// at most settleMax, before answering its client.
const (
	settleQuiet = 5 * time.Millisecond
	settleMax   = 50 * time.Millisecond
)

// relayed notes a relayed notification.
func (r *relay) relayed() {
	r.mu.Lock()
	r.last = time.Now()
	r.mu.Unlock()
}

// settle waits for the call's trailing notifications (above): until
// settleQuiet passed with none, counted from the call's return.
func (r *relay) settle() {
	start := time.Now()
	for {
		r.mu.Lock()
		last := r.last
		r.mu.Unlock()
		if last.IsZero() {
			return
		}
		from := start
		if last.After(start) {
			from = last
		}
		wait := time.Until(from.Add(settleQuiet))
		left := settleMax - time.Since(start)
		if wait <= 0 || left <= 0 {
			return
		}
		time.Sleep(min(wait, left))
	}
}

// relayFor is the relay of a tools/call request whose client has caps.
func relayFor(ctx context.Context, cr *mcp.CallToolRequest, caps *clientCaps) *relay {
	if cr.Session == nil {
		return nil
	}
	return &relay{ctx: ctx, ss: cr.Session, progressToken: cr.Params.GetProgressToken(), caps: caps}
}

// clientCaps are a call's client capabilities, read once when first
// asked for: on 2026-07-28 the SDK decodes them from the request's _meta
// at each asking (an encoding and a decoding), and most calls never ask
// (no approval to ask for, nothing to relay). Safe for concurrent use:
// the call and its upstream's requests may ask at once.
type clientCaps struct {
	once sync.Once
	read func() *mcp.ClientCapabilities
	caps *mcp.ClientCapabilities
}

// get returns the capabilities, nil when the client declared none.
func (c *clientCaps) get() *mcp.ClientCapabilities {
	if c == nil {
		return nil
	}
	c.once.Do(func() { c.caps = c.read() })
	return c.caps
}

// elicit and sample: the client declared elicitation, sampling.
func (r *relay) elicit() bool {
	caps := r.caps.get()
	return caps != nil && caps.Elicitation != nil
}

func (r *relay) sample() bool {
	caps := r.caps.get()
	return caps != nil && caps.Sampling != nil
}

// errNoCaller answers an upstream's elicitation or sampling request the
// gateway cannot relay.
var errNoCaller = errors.New("policycheck gateway: no client can answer this request (the call's client did not declare the capability, or several calls are in flight on this upstream)")

// begin registers r for one call to u and returns the progress token the
// upstream is sent and the function that ends the registration.
func (u *upstream) begin(r *relay) (token string, end func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.relaySeq++
	token = "policycheck-" + strconv.FormatUint(u.relaySeq, 10)
	if u.relays == nil {
		u.relays = map[string]*relay{}
	}
	u.relays[token] = r
	return token, func() {
		u.mu.Lock()
		delete(u.relays, token)
		u.mu.Unlock()
	}
}

// sole is the relay of the only call in flight on u, nil when there are
// none or several: a log message, an elicitation or a sampling request
// names no request, so with several calls in flight the gateway cannot
// tell whose it is, and relays it to no one.
func (u *upstream) sole() *relay {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.relays) != 1 {
		return nil
	}
	for _, r := range u.relays {
		return r
	}
	return nil
}

// relayProgress sends the upstream's progress for a call to its client,
// under the client's token.
func (u *upstream) relayProgress(ctx context.Context, p *mcp.ProgressNotificationParams) {
	tok, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	u.mu.Lock()
	r := u.relays[tok]
	u.mu.Unlock()
	if r == nil || r.ss == nil || r.progressToken == nil {
		return
	}
	r.relayed()
	if err := r.ss.NotifyProgress(r.ctx, &mcp.ProgressNotificationParams{
		ProgressToken: r.progressToken, Progress: p.Progress, Total: p.Total, Message: p.Message,
	}); err != nil {
		u.log.Debug("relaying progress failed", "upstream", u.spec.Name, "error", err)
	}
}

// relayLog sends the upstream's log message to the client of its only
// call in flight, at the level that client set.
func (u *upstream) relayLog(p *mcp.LoggingMessageParams) {
	r := u.sole()
	if r == nil || r.ss == nil {
		u.log.Debug("an upstream log message reached no client", "upstream", u.spec.Name)
		return
	}
	r.relayed()
	if err := r.ss.Log(r.ctx, &mcp.LoggingMessageParams{Level: p.Level, Logger: p.Logger, Data: p.Data}); err != nil {
		u.log.Debug("relaying a log message failed", "upstream", u.spec.Name, "error", err)
	}
}

// relayElicit asks the client of the only call in flight, when it
// declared elicitation.
func (u *upstream) relayElicit(p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	r := u.sole()
	if r == nil || r.ss == nil || !r.elicit() {
		return nil, errNoCaller
	}
	res, err := r.ss.Elicit(r.ctx, p)
	if err != nil {
		u.log.Info("relaying an elicitation failed", "upstream", u.spec.Name, "error", err)
	}
	return res, err
}

// relaySample asks the client of the only call in flight for a sampling,
// when it declared sampling.
func (u *upstream) relaySample(p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	r := u.sole()
	if r == nil || r.ss == nil || !r.sample() {
		return nil, errNoCaller
	}
	return r.ss.CreateMessage(r.ctx, p)
}
