package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// The store's Raft links are mutual TLS (pki.RaftConfig): each server
// issues its own member certificate from the CA, and a peer must present
// one that names it. Servers of a release before this one speak plain
// TCP, so during a rolling upgrade plain connections are taken until
// every store member has said it speaks TLS; then never again:
//
//	/isle/raft-tls-members/<member ID>   a member that speaks TLS
//	/isle/raft-tls                       every member does: plain is over
//	DATA-DIR/raft-tls                    this server has seen it so (a
//	                                     restart does not wait for the store)
const (
	raftTLSKey          = "/isle/raft-tls"
	raftTLSMemberPrefix = "/isle/raft-tls-members/"
	raftTLSFile         = "raft-tls"
	raftTLSLookup       = 2 * time.Second
)

// raftTLS says whether plain Raft connections are still taken, and which
// peers are members.
type raftTLS struct {
	node    *raft.Node
	dataDir string
	log     *slog.Logger
	over    atomic.Bool
}

func newRaftTLS(node *raft.Node, dataDir string, log *slog.Logger) *raftTLS {
	r := &raftTLS{node: node, dataDir: dataDir, log: log}
	if _, err := os.Stat(filepath.Join(dataDir, raftTLSFile)); err == nil {
		r.over.Store(true)
	}
	return r
}

// allowPlain reports whether a plain connection is still taken.
func (r *raftTLS) allowPlain() bool {
	if r.over.Load() {
		return false
	}
	if _, found, _ := r.node.KV().Get(raftTLSKey); found {
		r.end()
		return false
	}
	return true
}

// allCurrent reports whether every store member runs this release (or a
// later one): every member speaks TLS, as the store or this server's
// data directory says.
func (r *raftTLS) allCurrent() bool {
	return !r.allowPlain()
}

// end takes no plain connection from now on, across restarts.
func (r *raftTLS) end() {
	if r.over.Swap(true) {
		return
	}
	if err := writeFile(r.dataDir, raftTLSFile, []byte("every store member speaks TLS\n")); err != nil {
		r.log.Warn("cluster: not recorded that the store's links are TLS alone; the store says so", "err", err)
	}
	r.log.Info("cluster: the store's links are TLS alone from now on")
}

// isMember reports whether id is a member of the store. A member that
// does not know itself a member yet (a learner before its first
// snapshot) takes any member the CA certified.
func (r *raftTLS) isMember(id uint64) bool {
	ms := r.node.Members()
	self := r.node.ID()
	if !slices.ContainsFunc(ms, func(m raft.Member) bool { return m.ID == self }) {
		return true
	}
	return slices.ContainsFunc(ms, func(m raft.Member) bool { return m.ID == id })
}

// register records that this member speaks TLS, until it has.
func (r *raftTLS) register(ctx context.Context) {
	key := raftTLSMemberPrefix + strconv.FormatUint(r.node.ID(), 16)
	for {
		if _, found, _ := r.node.KV().Get(key); found {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := r.node.Propose(pctx, kv.Op{Type: kv.OpPut, Key: key, Value: []byte("tls"), IfModRev: 0})
		cancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(raftTLSLookup):
		}
	}
}

// maintain, on the leader, ends plain connections once every member has
// registered.
func (r *raftTLS) maintain(ctx context.Context) {
	for {
		if _, found, _ := r.node.KV().Get(raftTLSKey); found {
			r.end()
			return
		}
		waiting := 0
		for _, m := range r.node.Members() {
			if _, found, _ := r.node.KV().Get(raftTLSMemberPrefix + strconv.FormatUint(m.ID, 16)); !found {
				waiting++
			}
		}
		if waiting == 0 {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := r.node.Propose(pctx, kv.Op{Type: kv.OpPut, Key: raftTLSKey, Value: []byte("every member speaks TLS"), IfModRev: 0})
			cancel()
			if err == nil {
				r.end()
				return
			}
			r.log.Warn("cluster: recording that every store member speaks TLS failed; retrying", "err", fmt.Errorf("raft TLS: %w", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(raftTLSLookup):
		}
	}
}
