package kv

import "github.com/google/btree"

// View is a consistent, read-only picture of the store at one revision.
// Taking one is cheap (the B-tree is cloned copy-on-write) and reading it
// takes no lock, so a long read — an API list of every pod, say — neither
// blocks Apply nor sees writes made while it runs.
type View struct {
	rev  int64
	tree *btree.BTreeG[entry]
}

// View returns the current state as a View.
func (s *Store) View() *View {
	s.mu.Lock() // the clone must not race with a write
	defer s.mu.Unlock()
	return &View{rev: s.rev, tree: s.tree.Clone()}
}

// Revision is the store revision the view shows.
func (v *View) Revision() int64 { return v.rev }

// Range calls fn for every key with prefix, from startKey on, in key order,
// until fn returns false. Values are shared: read-only.
func (v *View) Range(prefix, startKey string, fn func(KeyValue) bool) {
	from := prefix
	if startKey > from {
		from = startKey
	}
	v.tree.AscendGreaterOrEqual(entry{key: from}, func(e entry) bool {
		if !hasPrefix(e.key, prefix) {
			return false
		}
		return fn(e.keyValue())
	})
}
