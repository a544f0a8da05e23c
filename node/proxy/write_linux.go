package proxy

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
)

// record is what the table holds after the last successful write: the
// hash of every chain's rules, of every set's elements, and the counters.
type record struct {
	chains   map[string]uint64
	sets     map[string]uint64
	counters map[string]bool
}

func newRecord() *record {
	return &record{chains: map[string]uint64{}, sets: map[string]uint64{}, counters: map[string]bool{}}
}

// write brings the table from what old says it holds to m, in one
// transaction; old nil means unknown: the table is replaced whole. Only
// what changed is sent: new sets, counters and chains are made; a chain
// whose rules changed is flushed and filled again, a set whose elements
// changed likewise; what is gone is removed last, once nothing refers to
// it. Affinity sets that stay keep their clients. It returns the record
// of the new table, and whether anything was sent.
func write(c *nftables.Conn, table string, old *record, m *tableModel) (*record, bool, error) {
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: table}
	w := &writer{t: t}
	dirty := old == nil
	if old == nil {
		c.AddTable(t) // so that the delete finds it on the first run
		c.DelTable(t)
		c.AddTable(t)
		old = newRecord()
	}
	next := newRecord()

	// New sets (their elements come after the chains they name), counters
	// and chains.
	for _, s := range m.sets {
		next.sets[s.name] = s.hash()
		if _, ok := old.sets[s.name]; !ok {
			if err := c.AddSet(w.set(s), nil); err != nil {
				return nil, false, fmt.Errorf("set %s: %w", s.name, err)
			}
			dirty = true
		}
	}
	for _, name := range m.counters {
		next.counters[name] = true
		if !old.counters[name] {
			c.AddObj(&nftables.CounterObj{Table: t, Name: name})
			dirty = true
		}
	}
	var fill []*chainModel
	for _, ch := range m.chains {
		h := ch.hash()
		next.chains[ch.name] = h
		switch was, ok := old.chains[ch.name]; {
		case !ok:
			c.AddChain(w.chain(ch))
			fill = append(fill, ch)
		case was != h:
			c.FlushChain(w.chain(ch))
			fill = append(fill, ch)
		}
	}
	// Rules, then elements: everything they name exists now.
	for _, ch := range fill {
		rules := ch.rules
		if ch.make != nil {
			rules = ch.make()
		}
		for _, r := range rules {
			c.AddRule(w.rule(ch.name, r))
		}
		dirty = true
	}
	for _, s := range m.sets {
		was, existed := old.sets[s.name]
		if existed && was == next.sets[s.name] {
			continue
		}
		set := w.set(s)
		if existed {
			c.FlushSet(set)
			dirty = true
		}
		if len(s.elems) > 0 {
			if err := c.SetAddElements(set, s.elems); err != nil {
				return nil, false, fmt.Errorf("set %s: %w", s.name, err)
			}
			dirty = true
		}
	}
	// What is gone, once nothing refers to it: the chains are emptied
	// (their rules name sets and chains), then the sets go (a map's
	// elements name chains), then the chains and the counters.
	var gone []*nftables.Chain
	for name := range old.chains {
		if _, ok := next.chains[name]; !ok {
			ch := &nftables.Chain{Table: t, Name: name}
			c.FlushChain(ch)
			gone = append(gone, ch)
			dirty = true
		}
	}
	for name := range old.sets {
		if _, ok := next.sets[name]; !ok {
			c.DelSet(&nftables.Set{Table: t, Name: name})
			dirty = true
		}
	}
	for _, ch := range gone {
		c.DelChain(ch)
	}
	for name := range old.counters {
		if !next.counters[name] {
			c.DeleteObject(&nftables.CounterObj{Table: t, Name: name})
			dirty = true
		}
	}
	if !dirty {
		return next, false, nil
	}
	if err := c.Flush(); err != nil {
		return nil, true, err
	}
	return next, true, nil
}

// writer turns models into nftables objects of one transaction.
type writer struct {
	t *nftables.Table
	// id numbers the sets of the transaction (the library's own counter
	// is shared by all connections of the process, unlocked).
	id uint32
}

func (w *writer) chain(ch *chainModel) *nftables.Chain {
	c := &nftables.Chain{Table: w.t, Name: ch.name}
	if h := ch.hook; h != nil {
		prio := h.prio
		c.Type, c.Hooknum, c.Priority = h.typ, h.hook, &prio
	}
	return c
}

func (w *writer) set(s *setModel) *nftables.Set {
	w.id++
	set := &nftables.Set{Table: w.t, Name: s.name, ID: w.id, KeyType: s.kind.key,
		Concatenation: len(nftables.ConcatSetTypeElements(s.kind.key)) > 1}
	if s.kind.hostOrder {
		set.KeyByteOrder = binaryutil.NativeEndian
	}
	if s.kind.verdicts {
		set.IsMap, set.DataType = true, nftables.TypeVerdict
	}
	set.Interval = s.kind.interval
	if s.kind.timeout > 0 {
		set.Dynamic, set.HasTimeout, set.Timeout = true, true, s.kind.timeout
	}
	return set
}

func (w *writer) rule(chain string, r ruleModel) *nftables.Rule {
	return &nftables.Rule{Table: w.t, Chain: &nftables.Chain{Table: w.t, Name: chain}, Exprs: r.exprs}
}
