// Command floor is the load tests' floor: an HTTP server that does the
// least a sidecar must do with a request, and nothing else. It reads each
// request's body whole into a reused buffer and answers 200 with a JSON
// object of the size the query's reply parameter asks for (default 16
// bytes). Driven like the sidecar, by the same clients on the same
// machine, it measures what the loopback, Go's HTTP server and the
// clients cost before any decision is made: the rate and latency that no
// sidecar on that machine can pass. Its handler is package floorhttp.
//
//	floor --addr 127.0.0.1:0
//
// It logs the address it listens on as `msg="floor serving" addr=...` on
// standard error, and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/policycheck/policycheck/internal/testkit/floorhttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "floor: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(2)
	}
	slog.New(slog.NewTextHandler(os.Stderr, nil)).Info("floor serving", "addr", ln.Addr().String())
	srv := &http.Server{Handler: &floorhttp.Handler{}}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}
