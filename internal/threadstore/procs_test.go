package threadstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tulip-temporal/tulip/internal/threadstate"

	"github.com/stretchr/testify/require"
)

// Two processes that share a DirStore's directory save the states of an
// older and a newer run of each of 40 threads at the same moment (each
// save lingers 5 ms between its compare and its rename): the newer state
// must win every thread. The controls break the store on purpose and must
// lose threads: without the OS file lock (the processes interleave their
// read, compare and rename) and without the compare.
func TestDirStoreNewestWinsAcrossProcesses(t *testing.T) {
	if os.Getenv("TULIP_DIRSTORE_CHILD") != "" {
		t.Skip("child process")
	}
	const threads = 40
	for _, tc := range []struct {
		name    string
		control string // "": the store as built
	}{
		{"as built", ""},
		{"control: no lock", "no-lock"},
		{"control: no compare", "no-compare"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now().Add(500 * time.Millisecond)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			outs := make([][]byte, 2)
			for i, role := range []string{"old", "new"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.Command(os.Args[0], "-test.run=^TestDirStoreChild$", "-test.count=1")
					cmd.Env = append(os.Environ(), "TULIP_DIRSTORE_CHILD="+strings.Join([]string{
						dir, role, strconv.Itoa(threads), strconv.FormatInt(start.UnixNano(), 10), tc.control}, ","))
					outs[i], errs[i] = cmd.CombinedOutput()
				}()
			}
			wg.Wait()
			for i := range errs {
				require.NoError(t, errs[i], "child: %s", outs[i])
			}
			lost := 0
			d := DirStore{Dir: dir}
			for n := range threads {
				h, err := d.read(fmt.Sprintf("thread-%d", n))
				require.NoError(t, err)
				require.NotNil(t, h)
				if h.Run != "new" {
					lost++
				}
			}
			if tc.control == "" {
				require.Zero(t, lost, "threads whose older run's save overwrote the newer")
			} else {
				require.NotZero(t, lost, "the control broke the store and no thread lost its newer state: the test cannot tell")
				t.Logf("%s: %d of %d threads kept the older state", tc.control, lost, threads)
			}
		})
	}
}

// TestDirStoreChild is one process of TestDirStoreNewestWinsAcrossProcesses.
func TestDirStoreChild(t *testing.T) {
	spec := os.Getenv("TULIP_DIRSTORE_CHILD")
	if spec == "" {
		t.Skip("run by TestDirStoreNewestWinsAcrossProcesses")
	}
	f := strings.Split(spec, ",")
	dir, role := f[0], f[1]
	threads, _ := strconv.Atoi(f[2])
	startNs, _ := strconv.ParseInt(f[3], 10, 64)
	testNoLock, testNoCompare = f[4] == "no-lock", f[4] == "no-compare"
	testHookBeforeRename = func() { time.Sleep(5 * time.Millisecond) }
	defer func() { testHookBeforeRename, testNoLock, testNoCompare = nil, false, false }()
	started := time.Unix(100, 0)
	if role == "new" {
		started = started.Add(time.Second)
	}
	d := DirStore{Dir: dir}
	for n := range threads {
		// Both processes reach thread n at the same moment.
		time.Sleep(time.Until(time.Unix(0, startNs).Add(time.Duration(n) * 20 * time.Millisecond)))
		ref := threadstate.ThreadRef{ThreadID: fmt.Sprintf("thread-%d", n), RunID: role, Started: started}
		require.NoError(t, d.Save(context.Background(), ref, &threadstate.Checkpoint{Run: role}))
	}
}
