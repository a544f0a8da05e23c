package containers

import (
	"context"
	"time"

	"github.com/containerd/containerd"
	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/events"
	"github.com/containerd/typeurl/v2"
)

// Resync, sent on Exits, asks the caller to look at every container:
// events may have been missed (containerd restarted, the stream broke).
const Resync = ""

// Exits delivers the IDs of containers whose process ended (their exit
// already recorded and their task deleted), and Resync.
func (r *Runtime) Exits() <-chan string { return r.exits }

// Run follows containerd's task events until ctx ends: it reaps exited
// containers and notes OOM kills. Call it once.
func (r *Runtime) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(r.ns(ctx))
		events, errs := r.client.Subscribe(sctx,
			`namespace==`+r.cfg.Namespace+`,topic=="/tasks/exit"`,
			`namespace==`+r.cfg.Namespace+`,topic=="/tasks/oom"`)
		if !first {
			// Whatever ended while the stream was down.
			r.reapAll(ctx)
			r.send(ctx, Resync)
		}
		first = false
		err := r.follow(sctx, events, errs)
		cancel()
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("containers: containerd event stream ended; subscribing again", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (r *Runtime) follow(ctx context.Context, events <-chan *events.Envelope, errs <-chan error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			return err
		case env := <-events:
			if env == nil || env.Event == nil {
				continue
			}
			ev, err := typeurl.UnmarshalAny(env.Event)
			if err != nil {
				r.log.Warn("containers: undecodable containerd event", "topic", env.Topic, "err", err)
				continue
			}
			switch e := ev.(type) {
			case *apievents.TaskOOM:
				r.mu.Lock()
				r.oom[e.ContainerID] = true
				r.mu.Unlock()
			case *apievents.TaskExit:
				if e.ID != e.ContainerID {
					continue // an exec'd process
				}
				if _, err := r.reap(r.ns(ctx), e.ContainerID); err != nil && !errdefs.IsNotFound(err) {
					r.log.Warn("containers: exit not recorded", "container", e.ContainerID, "err", err)
				}
				r.send(ctx, e.ContainerID)
			}
		}
	}
}

func (r *Runtime) send(ctx context.Context, id string) {
	select {
	case r.exits <- id:
	case <-ctx.Done():
	}
}

// reapAll reaps every container whose process ended.
func (r *Runtime) reapAll(ctx context.Context) {
	cs, err := r.Containers(ctx)
	if err != nil {
		r.log.Warn("containers: resync", "err", err)
		return
	}
	for _, c := range cs {
		if c.State == Exited {
			if _, err := r.reap(r.ns(ctx), c.ID); err != nil {
				r.log.Warn("containers: exit not recorded", "container", c.ID, "err", err)
			}
		}
	}
}

// Reattach takes up a container found running after the agent started
// again: its output is copied into its log again (appending), from the
// same FIFOs the shim kept open, so the container never noticed. A
// container that ended meanwhile is reaped. It is a no-op for containers
// already attached.
func (r *Runtime) Reattach(ctx context.Context, id string) error {
	ctx = r.ns(ctx)
	r.mu.Lock()
	_, ok := r.live[id]
	r.mu.Unlock()
	if ok {
		return nil
	}
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return r.notFound("reattach", id, err)
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		return r.notFound("reattach", id, err)
	}
	var st *stdio
	t, err := c.Task(ctx, func(fifos *cio.FIFOSet) (cio.IO, error) {
		var err error
		st, err = r.openOutput(fifos.Config, labels[labelLogPath], labels[labelStdinOnce] == "true")
		return st, err
	})
	if errdefs.IsNotFound(err) {
		return nil // no task: nothing to copy
	}
	if err != nil {
		return r.notFound("reattach", id, err)
	}
	if s, err := t.Status(ctx); err == nil && s.Status == containerd.Stopped {
		if st != nil {
			r.mu.Lock()
			r.live[id] = st
			r.mu.Unlock()
		}
		_, err := r.reap(ctx, id)
		return err
	}
	if st != nil {
		r.mu.Lock()
		r.live[id] = st
		r.mu.Unlock()
	}
	return nil
}
