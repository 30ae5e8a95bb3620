package cli

import (
	"github.com/tulip-temporal/tulip/devserver/cluster"
)

// clusterService is the hidden 'tulip cluster-service' command: one
// Temporal service (frontend, history, matching or worker) of a cluster
// that devserver/cluster started, in this process, until SIGTERM or
// SIGKILL. It prints "ready" once the service has started; the server's
// logs go to stderr, which the cluster sends to the process's log file.
func (e *env) clusterService(args []string) error {
	fs := e.flags("cluster-service")
	config := fs.String("config", "", "the cluster's config file (written by cluster.Start)")
	service := fs.String("service", "", "frontend, history, matching or worker")
	index := fs.Int("index", 0, "this process's index among its service's processes")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *config == "" || *service == "" {
		return usageError{"usage: tulip cluster-service --config FILE --service NAME [--index N]"}
	}
	return cluster.RunService(e.ctx, cluster.ServiceOptions{ConfigFile: *config, Service: *service, Index: *index, Ready: e.stdout, Log: e.stderr})
}
