package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
)

// setCurrentVersion makes a Build ID the current version of a Worker
// Deployment: new agent runs (a thread's next run, a continue-as-new)
// start on it, and runs open on an older version end there
// (docs/deploy.md). It waits until the version's workers have polled (the
// server knows a version once they have), at most --wait.
func (e *env) setCurrentVersion(args []string) error {
	fs := e.flags("set-current-version")
	c := e.connFlags(fs)
	deployment := fs.String("deployment", "", "the Worker Deployment (the workers' --deployment)")
	buildID := fs.String("build-id", "", "the Build ID to make current")
	wait := fs.Duration("wait", 60*time.Second, "how long to wait for the version's workers to be known to the server")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *deployment == "" || *buildID == "" || fs.NArg() != 0 {
		return usageError{"usage: tulip set-current-version --deployment D --build-id B [--address A]"}
	}
	s, err := e.connect(c, false, "")
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(e.ctx, *wait)
	defer cancel()
	h := s.client.WorkerDeploymentClient().GetHandle(*deployment)
	for {
		res, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: *buildID})
		if err == nil {
			prev := "none (unversioned workers)"
			if p := res.PreviousVersion; p != nil && p.BuildID != "" {
				prev = p.BuildID
			}
			fmt.Fprintf(e.stdout, "deployment %s: current version %s (was %s)\n", *deployment, *buildID, prev)
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("deployment %s: version %s was not made current within %s: %v (start its workers first: they make the version known)", *deployment, *buildID, *wait, err)
			}
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
