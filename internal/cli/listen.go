package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// unixScheme is the prefix of an --addr naming a Unix domain socket, as
// opa run --addr spells it.
const unixScheme = "unix://"

// listenAddr is serve's --addr read: a TCP host:port, or a Unix domain
// socket's path (unix:///path), with the permissions to give its file.
type listenAddr struct {
	network, address string
	perm             fs.FileMode // unix only
	flag             string      // the flag that named it
}

// String is the address as --addr would name it, and as serve logs it.
func (a listenAddr) String() string {
	if a.network == "unix" {
		return unixScheme + a.address
	}
	return a.address
}

// where is the address ln, listening on a, is logged at: the port the
// system chose for a TCP port 0, a socket as --addr names it.
func (a listenAddr) where(ln net.Listener) string {
	if a.network == "unix" {
		return a.String()
	}
	return ln.Addr().String()
}

// parseListenAddr reads an address flag (--addr, --diagnostic-addr)
// with --unix-socket-perm.
func parseListenAddr(flag, addr, perm string) (listenAddr, error) {
	path, isUnix := strings.CutPrefix(addr, unixScheme)
	if !isUnix {
		return listenAddr{network: "tcp", address: addr, flag: flag}, nil
	}
	if path == "" {
		return listenAddr{}, fmt.Errorf("%s %s names no socket path (%s/run/policycheck.sock)", flag, addr, unixScheme)
	}
	mode, err := strconv.ParseUint(perm, 8, 32)
	if err != nil || mode > 0o777 {
		return listenAddr{}, fmt.Errorf("--unix-socket-perm must be octal permissions such as 755 or 0660, not %q", perm)
	}
	return listenAddr{network: "unix", address: path, perm: fs.FileMode(mode), flag: flag}, nil
}

// parseListenAddrs reads serve's --addr and --diagnostic-addr (diag: ""
// for none) with --unix-socket-perm (permSet: given on the command line),
// refusing a permission that no socket would take, and one address given
// for both.
func parseListenAddrs(addr, diag, perm string, permSet bool) (main listenAddr, diagnostic *listenAddr, err error) {
	if main, err = parseListenAddr("--addr", addr, perm); err != nil {
		return listenAddr{}, nil, err
	}
	if diag != "" {
		d, err := parseListenAddr("--diagnostic-addr", diag, perm)
		if err != nil {
			return listenAddr{}, nil, err
		}
		// Port 0 is a port of the system's choosing for each.
		if d.network == main.network && d.address == main.address && !strings.HasSuffix(d.address, ":0") {
			return listenAddr{}, nil, fmt.Errorf("--diagnostic-addr %s is --addr too: give the diagnostic endpoints an address of their own, or leave it out (--addr serves /health and /metrics as well)", diag)
		}
		diagnostic = &d
	}
	if permSet && main.network != "unix" && (diagnostic == nil || diagnostic.network != "unix") {
		return listenAddr{}, nil, fmt.Errorf("--unix-socket-perm applies to a Unix domain socket (--addr %s<path>), not to --addr %s", unixScheme, addr)
	}
	return main, diagnostic, nil
}

// listen listens on a. A socket file left at a Unix address by a server
// that is gone (killed before it could remove it) is removed first, and
// said so through removed; a file there that is not a socket, or a socket
// another server answers on, is refused rather than taken over. The
// socket is given a.perm before anything is accepted; the listener
// removes its file when closed.
func listen(ctx context.Context, a listenAddr, removed func(path string)) (net.Listener, error) {
	var lc net.ListenConfig
	if a.network != "unix" {
		ln, err := lc.Listen(ctx, a.network, a.address)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", a.flag, a, err)
		}
		return ln, nil
	}
	if fi, err := os.Lstat(a.address); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s %s: %s exists and is not a socket", a.flag, a, a.address)
		}
		d := net.Dialer{Timeout: time.Second}
		conn, err := d.DialContext(ctx, "unix", a.address)
		if err == nil {
			conn.Close()
			return nil, fmt.Errorf("%s %s: another server is listening on %s", a.flag, a, a.address)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%s %s: %s is a socket whose server cannot be told gone: %w", a.flag, a, a.address, err)
		}
		if err := os.Remove(a.address); err != nil {
			return nil, fmt.Errorf("%s %s: removing the stale socket: %w", a.flag, a, err)
		}
		removed(a.address)
	}
	ln, err := lc.Listen(ctx, "unix", a.address)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", a.flag, a, err)
	}
	if err := os.Chmod(a.address, a.perm); err != nil {
		ln.Close()
		return nil, fmt.Errorf("--unix-socket-perm: %w", err)
	}
	return ln, nil
}

// exposed is the warning serve logs when a listens, at at, where others
// than the one who started it may ask for decisions without a token
// (withToken: --token-file is set): a TCP address beyond loopback, or a
// socket every user of the host may write to. "" when there is none.
func (a listenAddr) exposed(at string, withToken, pprof bool) string {
	var msg string
	switch host, _, _ := net.SplitHostPort(at); {
	case withToken:
		return ""
	case a.network == "unix" && a.perm&0o002 != 0:
		msg = "listening on a socket every user of this host may connect to (--unix-socket-perm " + strconv.FormatUint(uint64(a.perm), 8) + ") without --token-file: any of them can ask for decisions"
	case a.network == "tcp" && !net.ParseIP(host).IsLoopback():
		msg = "listening beyond loopback without --token-file: anyone who can reach this port can ask for decisions"
	default:
		return ""
	}
	if pprof {
		msg += " and read the server's profiles (--pprof)"
	}
	return msg
}
