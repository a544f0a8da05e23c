package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/storeapi"
)

// promoteSelf asks the leader, until it agrees, to make this new member a
// voter; the leader agrees once the member has caught up.
func promoteSelf(ctx context.Context, node *raft.Node, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-node.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
		lead, self := node.Leader(), node.ID()
		var leaderAddr string
		learner := true
		for _, m := range node.Members() {
			if m.ID == lead {
				leaderAddr = m.ClientAddr
			}
			if m.ID == self {
				learner = m.Learner
			}
		}
		if !learner {
			log.Info("server: this member is now a voter", "id", fmt.Sprintf("%x", self))
			return
		}
		if leaderAddr == "" {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := storeapi.NewClient(leaderAddr, nil).Promote(rctx, self)
		cancel()
		if err != nil {
			log.Debug("server: promotion not yet granted", "err", err)
		}
	}
}
