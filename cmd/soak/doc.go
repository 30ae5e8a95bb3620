// Package soak is 'tulip soak': many agent runs on worker OS processes
// while a nemesis kills workers, restarts and pauses the server, drops and
// delays the workers' connections (and, on a real cluster, kills history,
// matching and frontend processes and restarts PostgreSQL), then a checker
// that compares every run with the same runs played alone, fault-free, and
// the downstream services' witnesses with both.
//
// One file per concern:
//
//   - options.go: Options and the Summary line.
//   - server.go: the server under test: the embedded server in its own OS
//     process on a file database (the hidden 'tulip soak-server' command),
//     or a devserver/cluster cluster; each offers its fault kinds.
//   - proxy.go: a loopback TCP proxy between the workers and the server that
//     drops and delays connections.
//   - workers.go: worker OS processes (the hidden 'tulip soak-worker'
//     command, RunWorker), started, SIGKILLed and replaced.
//   - nemesis.go: fault kinds and their schedule.
//   - workload.go: the scripts, thread runs (agent.Start or a plain
//     ExecuteWorkflow), resumes, and the reference runs.
//   - witness.go: what the services and the workers recorded: requests by
//     call, activity attempts, and recovery times after worker kills.
//   - checker.go: the comparison, on plain values (CheckThread,
//     CheckWitnesses), and the replay of every history.
//   - soak.go: Run, which ties them together.
//
// The checker's controls: Options.Inject "dedup-off" (workers serve
// nothing) and "served-but-ran" (a worker runs the body of a call it
// served) must each end in duplicates.
package soak
