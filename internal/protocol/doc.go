// Package protocol holds what a run and its clients say to each other
// across the server: the stable names of activities, queries, metrics and
// error types (changing one breaks the replay of every history recorded
// with it), the parts of a run's input a client gives (ToolSpec,
// ModelParams), and the topics and items of a run's stream. Clients,
// workflows and activities all import it; it imports none of them.
package protocol
