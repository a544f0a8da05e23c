package ingress

import (
	"sync"
	"sync/atomic"
	"time"
)

const (
	// holdMin is how long requests pass by an endpoint that could not be
	// connected to before one of them tries it again.
	holdMin = 10 * time.Second
	// holdMax bounds the hold, which doubles with every failed trial.
	holdMax = 60 * time.Second
)

// health is the passive health of an endpoint. When connecting to it
// fails, requests pass it by until the hold runs out; then one request
// tries it (the trial) while the others keep passing it by. A response
// clears the hold; a failed trial doubles it, up to holdMax.
//
// Healthy endpoints cost requests one atomic load; the lock is taken only
// when the state changes.
type health struct {
	until atomic.Int64 // unix ns until which requests pass the endpoint by; 0: healthy

	mu   sync.Mutex    // serializes changes of until and hold
	hold time.Duration // the current hold; 0 when healthy
}

// held says whether a request picking endpoints at now() should pass this
// one by. After the hold ran out, the first caller that may make a trial
// gets false and trial true: its request is the trial, and the endpoint
// stays held for the others until the trial reports back (or another hold
// runs out).
func (h *health) held(now func() time.Time, mayTrial bool) (held, trial bool) {
	u := h.until.Load()
	if u == 0 {
		return false, false
	}
	if !mayTrial {
		return true, false
	}
	t := now().UnixNano()
	if t < u {
		return true, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch h.until.Load() {
	case 0:
		return false, false // cleared meanwhile
	case u:
		h.until.Store(t + int64(h.hold))
		return false, true
	default:
		return true, false // another request took the trial
	}
}

// failed notes that connecting failed at now, on a trial or not, and
// returns the hold that starts, and whether the endpoint was healthy
// before.
func (h *health) failed(now time.Time, trial bool) (hold time.Duration, wasHealthy bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	wasHealthy = h.hold == 0
	switch {
	case wasHealthy:
		h.hold = holdMin
	case trial:
		h.hold = min(2*h.hold, holdMax)
	}
	h.until.Store(now.Add(h.hold).UnixNano())
	return h.hold, wasHealthy
}

// ok notes a response from the endpoint, which clears its hold; it says
// whether the endpoint was held.
func (h *health) ok() bool {
	if h.until.Load() == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	wasHeld := h.hold != 0
	h.hold = 0
	h.until.Store(0)
	return wasHeld
}
