package kv

// dedupTable remembers the results of the last limit applied request IDs,
// first in first out. Results are kept compact: counters and keys, no
// values, so the table costs little memory and snapshot space. Guarded by
// Store.mu.
type dedupTable struct {
	ring  []dedupEntry // oldest at start; grows up to limit
	start int
	n     int
	index map[uint64]int // ID → ring slot
	limit int
}

type dedupEntry struct {
	id        uint64
	rev       int64
	failedOp  int32 // -1 if none
	succeeded bool
	prev      []kvMeta // per op; meta.mod == 0 means the key did not exist
	current   kvMeta   // mod == 0: none
}

// kvMeta is a KeyValue without its value.
type kvMeta struct {
	key                  string
	create, mod, version int64
}

func newDedupTable(limit int) *dedupTable {
	return &dedupTable{index: make(map[uint64]int), limit: limit}
}

func (t *dedupTable) lookup(id uint64) (*dedupEntry, bool) {
	slot, ok := t.index[id]
	if !ok {
		return nil, false
	}
	return &t.ring[slot], true
}

// add remembers e, evicting the oldest entry when full. e.id must be new
// and non-zero.
func (t *dedupTable) add(e dedupEntry) {
	if t.n == t.limit {
		old := &t.ring[t.start]
		delete(t.index, old.id)
		*old = e
		t.index[e.id] = t.start
		t.start++
		if t.start == len(t.ring) {
			t.start = 0
		}
		return
	}
	if t.n == len(t.ring) {
		c := 2 * len(t.ring)
		if c < 64 {
			c = 64
		}
		if c > t.limit {
			c = t.limit
		}
		ring := make([]dedupEntry, c)
		for i := 0; i < t.n; i++ {
			ring[i] = t.ring[t.slot(i)]
			t.index[ring[i].id] = i
		}
		t.ring, t.start = ring, 0
	}
	slot := t.slot(t.n)
	t.ring[slot] = e
	t.index[e.id] = slot
	t.n++
}

// slot returns the ring slot of the i-th oldest entry.
func (t *dedupTable) slot(i int) int {
	j := t.start + i
	if j >= len(t.ring) {
		j -= len(t.ring)
	}
	return j
}

// each calls fn for every entry, oldest first.
func (t *dedupTable) each(fn func(e *dedupEntry)) {
	for i := 0; i < t.n; i++ {
		fn(&t.ring[t.slot(i)])
	}
}

func metaOf(kv *KeyValue) kvMeta {
	if kv == nil {
		return kvMeta{}
	}
	return kvMeta{key: kv.Key, create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version}
}

func (m kvMeta) keyValue() *KeyValue {
	if m.mod == 0 {
		return nil
	}
	return &KeyValue{Key: m.key, CreateRevision: m.create, ModRevision: m.mod, Version: m.version}
}

// entryFor builds the compact form of a result.
func entryFor(id uint64, r *Result) dedupEntry {
	e := dedupEntry{id: id, rev: r.Revision, failedOp: int32(r.FailedOp), succeeded: r.Succeeded, current: metaOf(r.Current)}
	if r.Prev != nil {
		e.prev = make([]kvMeta, len(r.Prev))
		for i, p := range r.Prev {
			e.prev[i] = metaOf(p)
		}
	}
	return e
}

// result rebuilds the remembered result, marked Duplicate.
func (e *dedupEntry) result() Result {
	r := Result{Revision: e.rev, Succeeded: e.succeeded, FailedOp: int(e.failedOp), Current: e.current.keyValue(), Duplicate: true}
	if e.prev != nil {
		r.Prev = make([]*KeyValue, len(e.prev))
		for i, m := range e.prev {
			r.Prev[i] = m.keyValue()
		}
	}
	return r
}
