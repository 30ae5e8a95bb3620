package dedup

// Unknown is a call whose attempt's outcome was unknown (its worker lost,
// or an error its tool marked ambiguous), and what the run did about it:
// on its record and its trace line (docs/unknown.md).
type Unknown struct {
	// Cause is why the outcome was unknown, the first time.
	Cause string `json:"cause"`
	// Checks is how many times the tool's check asked the service;
	// Retries how many times the call ran again, with the same key, after
	// a check found it not applied (or a person approved).
	Checks  int `json:"checks"`
	Retries int `json:"retries,omitempty"`
	// Holds is how many times the run was interrupted for a person to
	// answer (a tool whose OnUnknown is "hold").
	Holds int `json:"holds,omitempty"`
	// Resolution is how it ended: applied, retried, answered, not_applied
	// or unresolved (the agentrun package's Resolved* constants).
	Resolution string `json:"resolution"`
}
