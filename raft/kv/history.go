package kv

import "sort"

// history is the bounded event log that serves watchers which fell behind
// or start in the past. It holds whole revisions only: every event with a
// revision > compactRev, oldest first, in a ring buffer that grows up to
// limit. An event's revision is its KV.ModRevision. Guarded by Store.mu.
type history struct {
	buf        []Event // ring; len(buf) is the capacity in use
	start, n   int     // index of the oldest event, number of events
	bytes      int64   // key+value bytes referenced by the events
	limit      int
	byteLimit  int64 // 0: none
	compactRev int64 // every event with revision > compactRev is held
}

func newHistory(limit int, byteLimit int64, rev int64) *history {
	return &history{limit: limit, byteLimit: byteLimit, compactRev: rev}
}

func eventBytes(ev *Event) int64 {
	return int64(len(ev.KV.Key) + len(ev.KV.Value))
}

func (h *history) at(i int) int { // ring slot of the i-th oldest event
	j := h.start + i
	if j >= len(h.buf) {
		j -= len(h.buf)
	}
	return j
}

// add appends the events of revision rev, evicting the oldest whole
// revisions to stay within the limits. A revision larger than the limits
// is not kept: the history then starts after it.
func (h *history) add(rev int64, evs []Event) {
	var size int64
	for i := range evs {
		size += eventBytes(&evs[i])
	}
	if len(evs) > h.limit || (h.byteLimit > 0 && size > h.byteLimit) {
		h.clear(rev)
		return
	}
	for h.n > 0 && (h.n+len(evs) > h.limit || (h.byteLimit > 0 && h.bytes+size > h.byteLimit)) {
		h.evictOldestRevision()
	}
	if need := h.n + len(evs); need > len(h.buf) {
		h.grow(need)
	}
	for i := range evs {
		j := h.at(h.n)
		h.buf[j] = evs[i]
		h.n++
	}
	h.bytes += size
}

func (h *history) grow(need int) {
	c := 2 * len(h.buf)
	if c < 64 {
		c = 64
	}
	if c < need {
		c = need
	}
	if c > h.limit {
		c = h.limit
	}
	buf := make([]Event, c)
	for i := 0; i < h.n; i++ {
		j := h.at(i)
		buf[i] = h.buf[j]
	}
	h.buf, h.start = buf, 0
}

func (h *history) evictOldestRevision() {
	rev := h.buf[h.start].KV.ModRevision
	for h.n > 0 && h.buf[h.start].KV.ModRevision == rev {
		h.bytes -= eventBytes(&h.buf[h.start])
		h.buf[h.start] = Event{} // drop references for the GC
		h.start++
		if h.start == len(h.buf) {
			h.start = 0
		}
		h.n--
	}
	h.compactRev = rev
}

// clear drops every event; the history then covers revisions > rev.
func (h *history) clear(rev int64) {
	h.buf = nil
	h.start, h.n, h.bytes = 0, 0, 0
	h.compactRev = rev
}

// read appends to dst, grouped in one batch per revision, the events with
// revision >= from whose key has prefix, scanning at most maxScan events
// (but never stopping inside a revision). It returns the batches and the
// last revision it scanned completely (from-1 if none), and whether it
// reached the newest event. The caller checks from-1 >= compactRev first.
func (h *history) read(from int64, prefix string, maxScan int) (batches [][]Event, through int64, end bool) {
	through = from - 1
	i := sort.Search(h.n, func(i int) bool { return h.buf[h.at(i)].KV.ModRevision >= from })
	var cur []Event
	curRev := int64(-1)
	scanned := 0
	for ; i < h.n; i++ {
		j := h.at(i)
		rev := h.buf[j].KV.ModRevision
		if rev != curRev {
			if curRev >= 0 {
				through = curRev
				if len(cur) > 0 {
					batches = append(batches, cur)
					cur = nil
				}
				if scanned >= maxScan {
					return batches, through, false
				}
			}
			curRev = rev
		}
		scanned++
		if hasPrefix(h.buf[j].KV.Key, prefix) {
			cur = append(cur, h.buf[j])
		}
	}
	if curRev >= 0 {
		through = curRev
		if len(cur) > 0 {
			batches = append(batches, cur)
		}
	}
	return batches, through, true
}

func hasPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && s[:len(prefix)] == prefix
}
