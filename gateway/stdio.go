package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/internal/wire"
)

// guardedLines passes newline-delimited JSON-RPC messages through and
// ends the stream, failing closed, at a batched request (a JSON array), a
// line longer than max bytes, or a line that is not strict JSON within
// the depth limit: what guardBody refuses over HTTP, on stdio.
type guardedLines struct {
	r     *bufio.Reader
	c     io.Closer
	max   int
	depth int
	buf   []byte
	err   error
}

func newGuardedLines(r io.ReadCloser, max, depth int) *guardedLines {
	return &guardedLines{r: bufio.NewReader(r), c: r, max: max, depth: depth}
}

// errBatch ends a stdio stream that sent a batched request.
var errBatch = errors.New("batched JSON-RPC requests are refused by this gateway")

func (g *guardedLines) Read(p []byte) (int, error) {
	for len(g.buf) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		line, err := g.line()
		if t := bytes.TrimSpace(line); len(t) > 0 && err == nil || len(t) > 0 && errors.Is(err, io.EOF) {
			switch {
			case t[0] == '[':
				err = errBatch
			default:
				if end, serr := wire.Skip("stdin", t, 0, g.depth); serr != nil {
					err = fmt.Errorf("a message is not acceptable JSON: %s", serr.Msg)
				} else if end != len(t) {
					err = errors.New("a line holds data after its JSON value")
				}
			}
			if err == nil || errors.Is(err, io.EOF) {
				g.buf = line
			}
		}
		if err != nil {
			g.err = err
		}
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

// line reads one line, its newline included, of at most max bytes.
func (g *guardedLines) line() ([]byte, error) {
	var out []byte
	for {
		chunk, err := g.r.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > g.max {
			return nil, fmt.Errorf("a message is longer than %d bytes", g.max)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return out, err
	}
}

func (g *guardedLines) Close() error { return g.c.Close() }

// stdioTransport is stdin and stdout behind guardedLines.
func (g *Gateway) stdioTransport() mcp.Transport {
	return &mcp.IOTransport{
		Reader:        newGuardedLines(os.Stdin, int(g.cfg.MaxBodyBytes), g.cfg.MaxDepth),
		Writer:        os.Stdout,
		MaxLineLength: int(g.cfg.MaxBodyBytes),
	}
}
