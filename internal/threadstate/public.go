package threadstate

// PublicStore adapts a store of package tulip's ThreadStore interface (or
// one of this package's, returned as it is) for this package; PublicState
// makes a *tulip.ThreadState of a checkpoint, and StateOf is the
// checkpoint a *tulip.ThreadState holds (an error for one built by hand). Package tulip sets them when it
// is initialized: it imports this package, which so cannot import it.
// s3store, storetest, the CLI and the module's tests use them.
var (
	PublicStore func(s any) Checkpointer
	PublicState func(cp *Checkpoint) any
	StateOf     func(st any) (*Checkpoint, error)
)
