package logs_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/isle-cluster/isle/node/logs"
)

func Example() {
	dir, err := os.MkdirTemp("", "logs")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "0.log")

	// The agent copies a container's stdout and stderr FIFOs into a Writer.
	clock := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	w, err := logs.NewWriter(path, 10<<20, 5, func() time.Time { clock = clock.Add(time.Second); return clock })
	if err != nil {
		panic(err)
	}
	io.WriteString(w.Stream(logs.Stdout), "starting\nlistening on :8080\n")
	io.WriteString(w.Stream(logs.Stderr), "warning: no config\n")
	io.WriteString(w.Stream(logs.Stdout), "bye")
	w.Close()

	// kubectl logs --tail=2 --timestamps
	err = logs.Read(context.Background(), path, logs.ReadOptions{TailLines: 2, Timestamps: true}, os.Stdout)
	if err != nil {
		panic(err)
	}
	fmt.Println()
	// Output:
	// 2024-01-02T03:04:08Z warning: no config
	// 2024-01-02T03:04:09Z bye
}
