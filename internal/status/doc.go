// Package status answers an operator's first question — why is my job still
// queued? — from what the product stores and what the cluster shows: for the
// deployment, whether GitHub gets its deliveries through to the webhook; per pool,
// the runners by phase, the jobs that wait and why, the last sweep and its recent
// errors; per job, the deliveries seen, the reservation and the runner that took
// it.
//
// It is pure: Build turns a snapshot (Input, gathered by package status/gather
// with the operator's own credentials) into a Report at an instant, and the
// Render functions print it as terminal tables or JSON. It imports neither the
// AWS SDK nor client-go, so it is tested without servers.
package status
