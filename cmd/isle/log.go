package main

import (
	"fmt"
	"log/slog"
	"os"

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
	routeKlog(log, agent.Unreachable)
	return log, nil
}
