package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// watchProxyKinds keeps open what every board's Service rules, NetworkPolicy
// rules and ingress controller watch (Services, EndpointSlices, Ingresses,
// IngressClasses, NetworkPolicies), with the requests client-go's reflector
// makes for them (listAndWatch).
// The streams are read to the end but not decoded into objects: the servers
// do for a hollow board what they do for a real one, while the hollow
// process does not spend, 250 times over, what each board would decode.
func watchProxyKinds(ctx context.Context, cs kubernetes.Interface, log *slog.Logger) {
	kinds := []struct {
		c        rest.Interface
		resource string
	}{
		{cs.CoreV1().RESTClient(), "services"},
		{cs.DiscoveryV1().RESTClient(), "endpointslices"},
		{cs.NetworkingV1().RESTClient(), "ingresses"},
		{cs.NetworkingV1().RESTClient(), "ingressclasses"},
		{cs.NetworkingV1().RESTClient(), "networkpolicies"},
	}
	for _, k := range kinds {
		go watchKind(ctx, k.c, k.resource, log)
	}
}

// errWatchEnded is a watch the server ended or refused as too old (an
// ERROR event, 410 Gone: the store's history no longer reaches its
// resourceVersion).
var errWatchEnded = errors.New("the server ended the watch")

// watchKind keeps resource watched across namespaces until ctx ends, a
// ListAndWatch of the reflector again a second after each failure: from
// the last resourceVersion seen, or from the start after a 410.
func watchKind(ctx context.Context, c rest.Interface, resource string, log *slog.Logger) {
	rv := "0" // the reflector's first list: whatever the server has
	for {
		last, err := listAndWatch(ctx, c, resource, rv)
		if ctx.Err() != nil {
			return
		}
		rv = last
		if errors.Is(err, errWatchEnded) {
			rv = ""
		}
		log.Warn("hollow: watch failed; listing again in a second", "resource", resource, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// watchTimeout is the reflector's: 5 to 10 minutes, so that the watches
// of the boards do not all end at once.
func watchTimeout() string { return strconv.Itoa(300 + rand.IntN(300)) }

// listAndWatch makes the requests of the reflector's ListAndWatch: a
// watch-list (the current objects, then the watch), which the servers
// refuse (they have no WatchList), so a list in pages of 500 at rv, then
// watches resumed from the last resourceVersion seen as the servers end
// them. It returns that resourceVersion when one fails.
func listAndWatch(ctx context.Context, c rest.Interface, resource, rv string) (string, error) {
	body, err := c.Get().Resource(resource).Param("watch", "true").Param("sendInitialEvents", "true").
		Param("resourceVersionMatch", "NotOlderThan").Param("allowWatchBookmarks", "true").
		Param("timeoutSeconds", watchTimeout()).Stream(ctx)
	if err == nil {
		// A server with WatchList: its stream is the list, then the watch.
		rv, err = drainEvents(body, rv)
		body.Close()
	} else {
		rv, err = listPages(ctx, c, resource, rv)
	}
	for err == nil {
		body, err = c.Get().Resource(resource).Param("watch", "true").Param("resourceVersion", rv).
			Param("allowWatchBookmarks", "true").Param("timeoutSeconds", watchTimeout()).Stream(ctx)
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return rv, fmt.Errorf("watch %s: %w: %w", resource, errWatchEnded, err)
		}
		if err != nil {
			return rv, fmt.Errorf("watch %s: %w", resource, err)
		}
		rv, err = drainEvents(body, rv)
		body.Close()
	}
	return rv, err
}

// listPages lists resource at rv as the reflector's pager does, and
// returns the list's resourceVersion: in pages of 500 from "" or "0", whole
// from a resourceVersion (which a watch cache serves).
func listPages(ctx context.Context, c rest.Interface, resource, rv string) (string, error) {
	cont := ""
	for {
		req := c.Get().Resource(resource)
		if rv == "" || rv == "0" {
			req = req.Param("limit", "500")
		}
		if cont != "" {
			req = req.Param("continue", cont)
		} else if rv != "" {
			req = req.Param("resourceVersion", rv)
		}
		body, err := req.Stream(ctx)
		if err != nil {
			return rv, fmt.Errorf("list %s: %w", resource, err)
		}
		lm, err := listMeta(body)
		body.Close()
		if err != nil {
			return rv, fmt.Errorf("list %s: %w", resource, err)
		}
		if lm.Continue == "" {
			return lm.ResourceVersion, nil
		}
		cont = lm.Continue
	}
}

// listMeta reads a list to its end and decodes only its metadata, which
// the servers write after the items (they stream lists).
func listMeta(r io.Reader) (metav1.ListMeta, error) {
	var lm metav1.ListMeta
	buf := make([]byte, 2*eventBuffer)
	n := 0 // buf[:n] holds the list's last bytes read
	for {
		if n == len(buf) {
			n = copy(buf, buf[eventBuffer:])
		}
		m, err := r.Read(buf[n:])
		n += m
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return lm, fmt.Errorf("read: %w", err)
		}
	}
	key := []byte(`],"metadata":`)
	i := bytes.LastIndex(buf[:n], key)
	if i < 0 {
		return lm, errors.New("no list metadata after the items")
	}
	if err := json.NewDecoder(bytes.NewReader(buf[i+len(key) : n])).Decode(&lm); err != nil {
		return lm, fmt.Errorf("list metadata: %w", err)
	}
	return lm, nil
}

// eventBuffer is how much of an event drainEvents holds at once; more than
// the start of any event, where its object's resourceVersion is.
const eventBuffer = 4 << 10

// drainEvents reads a watch's events (one JSON object a line, as the
// servers send them) to the end of the stream, and returns the last
// resourceVersion seen, rv if none.
func drainEvents(r io.Reader, rv string) (string, error) {
	br := bufio.NewReaderSize(r, eventBuffer)
	start := true // the next bytes read begin an event
	for {
		chunk, err := br.ReadSlice('\n')
		if start && len(chunk) > 0 {
			if bytes.HasPrefix(chunk, []byte(`{"type":"ERROR"`)) {
				return "", fmt.Errorf("watch: %w: %.200s", errWatchEnded, chunk)
			}
			if v := resourceVersionOf(chunk); v != "" {
				rv = v
			}
		}
		start = err == nil // a longer event continues in the next chunk
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return rv, nil
		case err != nil:
			return rv, fmt.Errorf("watch: read: %w", err)
		}
	}
}

var rvKey = []byte(`"resourceVersion":"`)

// resourceVersionOf finds the object's resourceVersion at the start of an
// event: the first "resourceVersion" key of the line is the object's
// metadata's, since the object's kind, apiVersion and metadata come first,
// and in metadata only name, generateName, namespace, selfLink and uid
// come before it (ObjectMeta's order). A string value cannot hold the key
// as it is: its quotes would be escaped.
func resourceVersionOf(event []byte) string {
	i := bytes.Index(event, rvKey)
	if i < 0 {
		return ""
	}
	v := event[i+len(rvKey):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return ""
	}
	return string(v[:j])
}
