package apiserver

import (
	"net/http"
	"strings"
	"sync"

	"github.com/isle-cluster/isle/control/authz"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Bounds of the requests served at once, as kube-apiserver's
// --max-requests-inflight and --max-mutating-requests-inflight (400 and
// 200 there; a board has less to give), and of the watches: per user, and
// in all. A request past a bound is answered 429 with Retry-After.
const (
	DefaultMaxReadsInFlight     = 200
	DefaultMaxMutatingInFlight  = 100
	DefaultMaxWatchesPerUser    = 200
	DefaultMaxWatches           = 2000
	tooManyRequestsRetrySeconds = 1
)

// Limits bounds what the server serves at once; zero fields take the
// defaults.
type Limits struct {
	ReadsInFlight, MutatingInFlight int
	WatchesPerUser, Watches         int
}

func (l Limits) withDefaults() Limits {
	for _, f := range []struct {
		v *int
		d int
	}{{&l.ReadsInFlight, DefaultMaxReadsInFlight}, {&l.MutatingInFlight, DefaultMaxMutatingInFlight},
		{&l.WatchesPerUser, DefaultMaxWatchesPerUser}, {&l.Watches, DefaultMaxWatches}} {
		if *f.v <= 0 {
			*f.v = f.d
		}
	}
	return l
}

// inFlight counts the requests served, by kind.
type inFlight struct {
	limits          Limits
	reads, mutating chan struct{}

	mu      sync.Mutex
	watches map[string]int // by user
	total   int
}

func newInFlight(l Limits) *inFlight {
	l = l.withDefaults()
	return &inFlight{limits: l, reads: make(chan struct{}, l.ReadsInFlight), mutating: make(chan struct{}, l.MutatingInFlight),
		watches: map[string]int{}}
}

// admit takes a place for r of u, or answers why not; release gives it
// back when the request is done. Administrators (system:masters) are not
// counted, as kube-apiserver's priority and fairness exempts them: a flood
// from anyone else does not lock them out.
func (f *inFlight) admit(r *http.Request, u *User) (release func(), err error) {
	if u.InGroup(authz.GroupMasters) {
		return func() {}, nil
	}
	user := u.Name
	switch {
	case isWatch(r):
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.watches[user] >= f.limits.WatchesPerUser {
			return nil, tooManyRequests("watches of user " + user)
		}
		if f.total >= f.limits.Watches {
			return nil, tooManyRequests("watches")
		}
		f.watches[user]++
		f.total++
		return func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.total--
			if f.watches[user]--; f.watches[user] == 0 {
				delete(f.watches, user)
			}
		}, nil
	case isLongRunning(r):
		// exec, attach, port-forward, proxy and followed logs: bounded by
		// the node agents they reach, as kube-apiserver leaves them.
		return func() {}, nil
	}
	slots, kind := f.reads, "read-only requests"
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		slots, kind = f.mutating, "mutating requests"
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	default:
		return nil, tooManyRequests(kind)
	}
}

func tooManyRequests(what string) error {
	return apierrors.NewTooManyRequests("too many "+what+" at once; please try again later", tooManyRequestsRetrySeconds)
}

// isWatch reports a watch request (?watch=true, or the legacy /watch/
// paths).
func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1" || strings.Contains(r.URL.Path, "/watch/")
}

// isLongRunning reports a request that streams for as long as its client
// wants: exec, attach, port-forward, proxy, followed logs.
func isLongRunning(r *http.Request) bool {
	p := r.URL.Path
	for _, sub := range []string{"/exec", "/attach", "/portforward"} {
		if strings.HasSuffix(p, sub) {
			return true
		}
	}
	if strings.HasSuffix(p, "/proxy") || strings.Contains(p, "/proxy/") {
		return true
	}
	f := r.URL.Query().Get("follow")
	return strings.HasSuffix(p, "/log") && (f == "true" || f == "1")
}
