package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"k8s.io/client-go/tools/cache"

	"github.com/isle-cluster/isle/node/agent"
)

// newLogger returns a text logger on stderr at the given level, and routes
// client-go's klog output through it (routeKlog).
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	routeKlog(log, quietKlog)
	return log, nil
}

// quietKlog picks the errors of client-go's informers that the agent
// reports itself, once per change of its servers' state: its API servers
// unreachable, and a watch a server closed as it went (a very short
// watch, which the informer retries).
func quietKlog(err error) bool {
	var short *cache.VeryShortWatchError
	return agent.Unreachable(err) || errors.As(err, &short)
}
