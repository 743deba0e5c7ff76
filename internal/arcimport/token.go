package arcimport

// registrationToken: a persistent pool registers its runners with the scope's
// registration token, and the sweeper refuses it together with docker (root on
// the node, where a job reads the token) or a service account (a Kubernetes
// token in every job) unless the pool accepts that its jobs can read the token
// (pool.TokenReadable). ARC's runners had both, and their jobs could read the
// token as well (in the runner's environment, with sudo), so the import carries
// ARC's exposure as it was: it writes allowJobsToReadRegistrationToken: true,
// and says so in a note, for the reviewer to keep or remove. What else of the
// template lets a job read the token (a user, privilege escalation) is not ARC's
// default: the sweeper's check refuses the pool, and the import reports it.
func (c *converter) registrationToken(d *object, dr *draft) {
	sidecar, dind := dr.docker()
	if dr.ephemeral == nil || *dr.ephemeral || !sidecar && !dind && dr.serviceAccount == "" {
		return
	}
	how := "jobs that use docker are root on the node"
	if !sidecar && !dind {
		how = "every job gets the service account's Kubernetes token"
	}
	dr.tokenReadable = true
	c.note(d, "ephemeral: false: the pool's runners register with the registration token of their scope, which its jobs can read "+
		"(%s) and with which they can register runners of their own in that scope for up to an hour, as ARC's could; "+
		"the pool says it accepts that (allowJobsToReadRegistrationToken: true), without which the sweeper refuses it. "+
		"To remove the risk, make the runners ephemeral (JIT configs) or leave docker and the service account out (docs/security.md)", how)
}
