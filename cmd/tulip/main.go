// Command tulip runs LLM-agent tool calls safely on Temporal: a demo on an
// embedded server, a dev server with a worker, scenario runs, log
// inspection, history export and replay, and resume.
//
//	go run ./cmd/tulip demo
//	go run ./cmd/tulip help
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tulip-temporal/tulip/cmd/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
