// Command serveload is a load test of 'tulip serve': C concurrent
// conversations, each driven by the official OpenAI Go client
// (openai-go), through a round-robin proxy in front of two 'tulip serve
// --no-worker' processes, for a duration; meanwhile worker processes are
// SIGKILLed and replaced, and one serve instance is restarted. Everything
// runs on loopback:
//
//   - an embedded Temporal server (package devserver), in this process;
//   - a scripted OpenAI-compatible model (model.go): "Please refund ORDER"
//     gets an issue_refund call, then an answer naming the receipt; "are
//     you sure it went through?" gets the same refund again (it must be
//     served from the thread's log: outcome "cached"), then an answer
//     naming the same receipt. It answers after a fixed delay and records
//     the time spent on each turn's calls;
//   - the billing witness (internal/demo/billing), a real HTTP service
//     that makes one refund per idempotency key;
//   - worker OS processes (this binary, -role worker): the tulip plugin,
//     the demo toolbox refunding through billing, the model as "openai";
//   - two 'tulip serve' OS processes (this binary, -role serve, which runs
//     what cmd/tulip runs; or -tulip BIN) sharing --id-key-file and
//     --api-key-file;
//   - the proxy (proxy.go), and the conversations (client.go).
//
// The rule by which a conversation sends a message again without ever
// sending it twice is in client.go. A turn whose answer has not come
// within -turn-timeout is read again once the load is over (-settle): a
// late answer is checked as any other; only a message that never gets
// one is lost.
//
// At the end it reports lost messages, wrong answers (the answer's text,
// the refund's outcome "executed" then "cached", the receipt the same,
// billing holding it), effects repeated at the billing witness (refunds
// billing made beyond one per order), p50/p99 latency and latency added
// over the upstream's, and the serve processes' memory per open thread
// (their RSS peak less their RSS before the load, over the threads open
// at once), and exits 1 when any of the first three is not 0 (2 when it
// could not run).
//
//	go run ./tests/serveload -conversations 200 -duration 10m
//
// -break-dedup is the checker's control: the workers' issue_refund is not
// idempotent and refunds under a new key each time, so every re-emitted
// refund is made again; the report must show repeated effects.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tulip-temporal/tulip/cmd/cli"
)

// config is the load test's flags.
type config struct {
	conversations int
	duration      time.Duration
	turns         int
	threadTurns   int
	workers       int
	killEvery     time.Duration
	restartAt     float64
	upstreamDelay time.Duration
	think         time.Duration
	turnTimeout   time.Duration
	settle        time.Duration
	breakDedup    bool
	jsonOut       string
	tulipBin      string
	dir           string
	verbose       bool
}

func main() {
	// The hidden roles: the processes this one starts.
	if len(os.Args) > 2 && os.Args[1] == "-role" {
		switch os.Args[2] {
		case "worker":
			os.Exit(runWorker(os.Args[3:]))
		case "serve":
			// What cmd/tulip runs: 'tulip ARGS'.
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := cli.Main(ctx, os.Args[3:], os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		}
		fmt.Fprintf(os.Stderr, "serveload: unknown role %q\n", os.Args[2])
		os.Exit(2)
	}
	var c config
	flag.IntVar(&c.conversations, "conversations", 200, "concurrent conversations")
	flag.DurationVar(&c.duration, "duration", 10*time.Minute, "how long conversations start new turns")
	flag.IntVar(&c.turns, "turns", 0, "turns per conversation at most (0: until -duration ends)")
	flag.IntVar(&c.threadTurns, "thread-turns", 6, "turns per thread: a conversation starts a new thread after this many (refund, confirm, refund, ...)")
	flag.IntVar(&c.workers, "workers", 2, "worker processes")
	flag.DurationVar(&c.killEvery, "kill-every", 30*time.Second, "SIGKILL a random worker process this often, and start another (0: never)")
	flag.Float64Var(&c.restartAt, "restart-at", 0.5, "restart the second serve instance (SIGTERM, then start it again on its port) at this fraction of -duration (0: never)")
	flag.DurationVar(&c.upstreamDelay, "upstream-delay", 20*time.Millisecond, "the scripted model's latency per call")
	flag.DurationVar(&c.think, "think", 0, "pause between a conversation's turns (each 0.5 to 1.5 times it; conversations start spread over it)")
	flag.DurationVar(&c.turnTimeout, "turn-timeout", 3*time.Minute, "a conversation waits this long for a turn's answer, then goes on with a new thread")
	flag.DurationVar(&c.settle, "settle", 5*time.Minute, "once the load is over, how long the answers of turns past -turn-timeout are waited for (then they are lost)")
	flag.BoolVar(&c.breakDedup, "break-dedup", false, "control: the workers' issue_refund is not idempotent and refunds under a new key each time (the report must show repeated effects)")
	flag.StringVar(&c.jsonOut, "json", "", "also write the report as JSON to this file (- for stdout, instead of the text)")
	flag.StringVar(&c.tulipBin, "tulip", "", "a tulip binary to run 'tulip serve' with (default: this program, which runs the same code)")
	flag.StringVar(&c.dir, "dir", "", "directory for the processes' logs and key files (default: a temporary one, removed unless the run fails)")
	flag.BoolVar(&c.verbose, "v", false, "progress on stderr")
	flag.Parse()
	if flag.NArg() != 0 || c.conversations <= 0 || c.duration <= 0 || c.workers <= 0 || c.threadTurns <= 0 || c.turnTimeout <= 0 || c.settle < 0 ||
		c.restartAt < 0 || c.restartAt >= 1 || c.killEvery < 0 || c.upstreamDelay < 0 || c.think < 0 || c.turns < 0 {
		fmt.Fprintln(os.Stderr, "usage: serveload [-conversations N] [-duration D] [-turns N] [-thread-turns N] [-workers N] [-kill-every D] [-restart-at F] [-upstream-delay D] [-think D] [-turn-timeout D] [-settle D] [-break-dedup] [-json FILE] [-tulip BIN] [-dir DIR] [-v]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serveload:", err)
		os.Exit(2)
	}
	if err := rep.write(c.jsonOut, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "serveload:", err)
		os.Exit(2)
	}
	if !rep.OK {
		os.Exit(1)
	}
}
