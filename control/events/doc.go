// Package events records Kubernetes Events (core/v1) for the controllers
// that run in the server, as client-go's event recorder does for
// Kubernetes' controllers:
//
//   - a Recorder names its component ("default-scheduler",
//     "deployment-controller"); Eventf builds the Event about an object
//     (in the object's namespace, or "default" for cluster-scoped objects
//     such as Nodes) and hands it to the Broadcaster without waiting;
//   - the Broadcaster writes Events through the registry from a few
//     writers, each with a bounded queue: when a queue is full the Event is
//     dropped and counted (isle_events_dropped_total), so recording never
//     slows a controller down;
//   - an Event identical to one seen before (same object, type, reason,
//     message and source) increments that Event's count and lastTimestamp
//     instead of creating another; from the tenth different message with
//     the same object, type and reason within ten minutes on, the messages
//     are combined into one Event whose message starts "(combined from
//     similar events): ", as Kubernetes' EventCorrelator does. Events
//     queued together for the same Event are written once;
//   - Events expire: the Broadcaster deletes Events not updated for its
//     TTL (one hour, Kubernetes' default --event-ttl), including those
//     other clients wrote.
//
// The Broadcaster runs in the controllers' table, so it writes and expires
// Events on the Raft leader only; Events recorded while it is not running
// wait in its queues and are written when it runs, or dropped if the
// queues are full.
//
// Left out of Kubernetes' recorder: the per-object spam filter (a token
// bucket of 25 events, one more every five minutes) and retries of a
// failed write; an Event whose write fails is lost, and counted.
package events
